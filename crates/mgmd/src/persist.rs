//! What mgmd must not forget when it restarts (docs/design/0019-fault-
//! harness.md, decision 7): each data node's start count, which is the
//! node's incarnation (peers refuse an incarnation they cut, so a count
//! started again from 0 would lock a restarted node out), and the
//! arbitration grants of the current run of the cluster (a forgotten
//! grant could let the second half of a split be granted too).
//!
//! One small JSON file, `mgmd-<id>.state.json` in mgmd's `data_dir`,
//! replaced whole on every change: written to a temporary file, synced,
//! renamed over the old one, and the directory synced, so a crash leaves
//! the old file or the new one. Registrations and grants are rare (a node
//! start, a split), so the sync costs nothing that matters.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// One grant as recorded (see `Grants` in the server).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    pub membership_id: u32,
    pub before: Vec<u16>,
    pub side: Vec<u16>,
}

/// What the file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Remembered {
    /// Data node id -> registrations so far.
    pub start_counts: BTreeMap<u16, u64>,
    /// Oldest first.
    pub grants: Vec<GrantRecord>,
}

/// The state file of one mgmd.
#[derive(Clone, Debug)]
pub struct StateFile {
    path: PathBuf,
}

impl StateFile {
    /// The state file of mgmd `node_id` in `dir` (made if missing).
    pub fn in_dir(dir: &Path, node_id: u16) -> Result<StateFile, String> {
        std::fs::create_dir_all(dir)
            .map_err(|error| format!("cannot create mgmd's data_dir {}: {error}", dir.display()))?;
        Ok(StateFile {
            path: dir.join(format!("mgmd-{node_id}.state.json")),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What was remembered; nothing if the file does not exist. A file
    /// that cannot be read or parsed is an error: mgmd does not start on
    /// a state it cannot trust.
    pub fn load(&self) -> Result<Remembered, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Remembered::default())
            }
            Err(error) => return Err(format!("cannot read {}: {error}", self.path.display())),
        };
        parse(&text).map_err(|why| {
            format!(
                "{} is damaged ({why}); it holds the data nodes' start counts and the \
                 arbitration grants: restore it, or remove it only with every data node stopped",
                self.path.display()
            )
        })
    }

    /// Replaces the file with `remembered`, durably.
    pub fn save(&self, remembered: &Remembered) -> Result<(), String> {
        let text = render(remembered).to_string() + "\n";
        let temporary = self.path.with_extension("json.new");
        let fail = |what: &str, error: std::io::Error| {
            format!("cannot {what} {}: {error}", temporary.display())
        };
        let mut file = std::fs::File::create(&temporary).map_err(|error| fail("create", error))?;
        file.write_all(text.as_bytes())
            .map_err(|error| fail("write", error))?;
        file.sync_all().map_err(|error| fail("sync", error))?;
        std::fs::rename(&temporary, &self.path).map_err(|error| fail("rename", error))?;
        if let Some(dir) = self.path.parent() {
            std::fs::File::open(dir)
                .and_then(|dir| dir.sync_all())
                .map_err(|error| format!("cannot sync {}: {error}", dir.display()))?;
        }
        Ok(())
    }
}

fn render(remembered: &Remembered) -> Value {
    let counts: serde_json::Map<String, Value> = remembered
        .start_counts
        .iter()
        .map(|(id, count)| (id.to_string(), Value::from(*count)))
        .collect();
    let grants: Vec<Value> = remembered
        .grants
        .iter()
        .map(|grant| {
            json!({
                "membership_id": grant.membership_id,
                "before": grant.before,
                "side": grant.side,
            })
        })
        .collect();
    json!({ "version": 1, "start_counts": counts, "grants": grants })
}

fn parse(text: &str) -> Result<Remembered, String> {
    let value: Value = serde_json::from_str(text).map_err(|error| error.to_string())?;
    if value["version"] != 1 {
        return Err(format!("version {} (this mgmd reads 1)", value["version"]));
    }
    let mut remembered = Remembered::default();
    for (id, count) in value["start_counts"]
        .as_object()
        .ok_or("no \"start_counts\" object")?
    {
        let id: u16 = id.parse().map_err(|_| format!("node id {id:?}"))?;
        let count = count
            .as_u64()
            .ok_or_else(|| format!("start count of node {id}: {count}"))?;
        remembered.start_counts.insert(id, count);
    }
    let ids = |value: &Value| -> Result<Vec<u16>, String> {
        value
            .as_array()
            .ok_or("a grant's nodes are not an array")?
            .iter()
            .map(|id| {
                id.as_u64()
                    .and_then(|id| u16::try_from(id).ok())
                    .ok_or_else(|| format!("node id {id}"))
            })
            .collect()
    };
    for grant in value["grants"].as_array().ok_or("no \"grants\" array")? {
        remembered.grants.push(GrantRecord {
            membership_id: grant["membership_id"]
                .as_u64()
                .and_then(|id| u32::try_from(id).ok())
                .ok_or("a grant's membership_id")?,
            before: ids(&grant["before"])?,
            side: ids(&grant["side"])?,
        });
    }
    Ok(remembered)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_saved_is_loaded_and_a_damaged_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("mgmd-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let file = StateFile::in_dir(&dir, 1).unwrap();
        assert_eq!(file.load().unwrap(), Remembered::default());
        let remembered = Remembered {
            start_counts: [(2, 5), (3, 1)].into_iter().collect(),
            grants: vec![GrantRecord {
                membership_id: 7,
                before: vec![2, 3],
                side: vec![2],
            }],
        };
        file.save(&remembered).unwrap();
        assert_eq!(file.load().unwrap(), remembered);
        std::fs::write(file.path(), "{\"version\":1,\"start_counts\":{\"x\":1}").unwrap();
        let error = file.load().unwrap_err();
        assert!(error.contains("damaged"), "{error}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
