//! The write ledger of `keylookup --ledger FILE`: writers record every
//! write they send and every write the cluster acknowledged (with its
//! GCI); `--verify-only --ledger FILE --restored-gci G` then checks that
//! no row is older than its last acknowledged write with GCI <= G, which
//! is how a durability test proves that nothing committed was lost.
//!
//! The file is text, one record per line, appended to by any number of
//! writer processes (each flush is one `write` on a file opened for
//! appending, and holds whole lines only, so lines never interleave):
//!
//! ```text
//! i <key> <round>                  a write of <round> to <key> is about to be sent
//! x <key>                          a delete of <key> is about to be sent
//! w <key> <round> <H>/<L>          the write of <round> to <key> committed in GCI H/L
//! w <key> <round> <H>/<L> durable  ... and was acknowledged once H/L was durable
//! d <key> <H>/<L>                  a delete of <key> committed in GCI H/L
//! d <key> <H>/<L> durable          ... and was acknowledged once H/L was durable
//! r <H>/<L>                        the cluster restarted from disk, restoring GCI H/L
//! # ...                            a comment
//! ```
//!
//! A restart line (written by whoever restarted the cluster, after every
//! writer of the previous run stopped) voids every earlier acknowledgement
//! of a GCI above the GCI it restored: that commit was lost, legitimately,
//! and the row must not hold it. Without the line a later, higher restored
//! GCI would wrongly require it.
//!
//! The `durable` marker (from `keylookup --durable`) is optional, so
//! ledgers written before it existed read the same.
//!
//! An intent is flushed before its transaction is sent, so every round a
//! row can hold is in the ledger even if the writer dies; a write with an
//! intent and no acknowledgement has an unknown outcome (refused, timed
//! out, connection lost) and may or may not be in the table.
//!
//! The rule, per key, with A the acknowledged writes and deletes of GCI
//! <= G and g* the highest GCI in A: nothing is required when A is empty;
//! otherwise the row must be the image of an acknowledged write of GCI >=
//! g* or of a write of unknown outcome, and an absent row needs an
//! acknowledged delete of GCI >= g* or a delete of unknown outcome. A row
//! holding an older acknowledged write, a round the ledger never saw, a
//! write acknowledged with a GCI above G (a restart must not bring back
//! anything of an incomplete GCI; all rows of a transaction share its GCI,
//! so no acknowledged transaction can be partly present), or missing where
//! a write must be, fails.
//!
//! G is the restored GCI given to the verify run, raised to the highest
//! GCI any acknowledgement was marked durable in: the cluster promised
//! that every commit up to that GCI (of any key) survives any crash, so a
//! restore below it must not lose them, and a row that did is named as
//! lost beyond the restored GCI.

use client::Gci;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

/// A buffer is written out once it holds this many bytes.
const FLUSH_BYTES: usize = 64 * 1024;

/// The ledger file, shared by the threads of one writer process.
pub(crate) struct LedgerFile {
    path: PathBuf,
    file: Mutex<File>,
}

impl LedgerFile {
    /// Opens `path` for appending (creating it if needed).
    pub(crate) fn open(path: &Path) -> std::io::Result<LedgerFile> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(LedgerFile {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    fn append(&self, text: &str) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(text.as_bytes())
    }
}

/// One thread's records not yet written out.
pub(crate) struct LedgerBuffer<'a> {
    file: &'a LedgerFile,
    text: String,
    /// The first write error (the run fails with it at the end).
    pub(crate) error: Option<String>,
}

impl<'a> LedgerBuffer<'a> {
    pub(crate) fn new(file: &'a LedgerFile) -> LedgerBuffer<'a> {
        LedgerBuffer {
            file,
            text: String::new(),
            error: None,
        }
    }

    /// A write of `round` to `key` is about to be sent.
    pub(crate) fn intend_write(&mut self, key: u32, round: u64) {
        let _ = writeln!(self.text, "i {key} {round}");
    }

    /// A delete of `key` is about to be sent.
    pub(crate) fn intend_delete(&mut self, key: u32) {
        let _ = writeln!(self.text, "x {key}");
    }

    /// The write of `round` to `key` committed in `gci` (acknowledged once
    /// `gci` was durable, if `durable`).
    pub(crate) fn acknowledged_write(&mut self, key: u32, round: u64, gci: Gci, durable: bool) {
        let _ = writeln!(self.text, "w {key} {round} {gci}{}", marker(durable));
        self.flush_if_full();
    }

    /// A delete of `key` committed in `gci` (acknowledged once `gci` was
    /// durable, if `durable`).
    pub(crate) fn acknowledged_delete(&mut self, key: u32, gci: Gci, durable: bool) {
        let _ = writeln!(self.text, "d {key} {gci}{}", marker(durable));
        self.flush_if_full();
    }

    fn flush_if_full(&mut self) {
        if self.text.len() >= FLUSH_BYTES {
            self.flush();
        }
    }

    /// Writes out every buffered record (intents must be out before their
    /// transactions are sent).
    pub(crate) fn flush(&mut self) {
        if self.text.is_empty() {
            return;
        }
        if let Err(error) = self.file.append(&self.text) {
            self.error
                .get_or_insert_with(|| format!("{}: {error}", self.file.path.display()));
        }
        self.text.clear();
    }
}

/// The suffix of an acknowledgement line that was acknowledged durable.
fn marker(durable: bool) -> &'static str {
    if durable {
        " durable"
    } else {
        ""
    }
}

impl Drop for LedgerBuffer<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Parses a GCI as `H/L`, or `H` meaning every epoch of global checkpoint
/// H (H/4294967295).
pub(crate) fn parse_gci(text: &str) -> Result<Gci, String> {
    let number = |part: &str| {
        part.trim()
            .parse::<u32>()
            .map_err(|_| format!("{text:?} is not a GCI (expected H/L or H)"))
    };
    match text.split_once('/') {
        Some((high, low)) => Ok(Gci::from_parts(number(high)?, number(low)?)),
        None => Ok(Gci::from_parts(number(text)?, u32::MAX)),
    }
}

/// What the ledger says about one key.
#[derive(Default, Debug)]
struct KeyHistory {
    /// Rounds with an intent.
    intended: Vec<u64>,
    /// Acknowledged writes (`Some(round)`) and deletes (`None`).
    acknowledged: Vec<Acknowledgement>,
    /// Delete intents.
    delete_intents: u32,
}

/// One acknowledged write or delete.
#[derive(Clone, Copy, Debug)]
struct Acknowledgement {
    /// The round written (`None`: a delete).
    round: Option<u64>,
    gci: Gci,
    /// Acknowledged once durable.
    durable: bool,
    /// Restart lines before it in the file.
    restarts_before: usize,
}

/// A loaded ledger, for checking rows.
#[derive(Default, Debug)]
pub(crate) struct Ledger {
    keys: HashMap<u32, KeyHistory>,
    /// The highest GCI an acknowledgement was marked durable in (0: none).
    durable_gci: Gci,
    /// The restored GCI of each restart line, in file order.
    restarts: Vec<Gci>,
}

impl Ledger {
    /// Reads and parses `path`; the error names the line.
    pub(crate) fn load(path: &Path) -> Result<Ledger, String> {
        let file = File::open(path).map_err(|error| format!("{}: {error}", path.display()))?;
        let mut ledger = Ledger::default();
        for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|error| format!("{}: {error}", path.display()))?;
            ledger.add_line(&line).map_err(|message| {
                format!("{} line {}: {message}: {line:?}", path.display(), index + 1)
            })?;
        }
        Ok(ledger)
    }

    fn add_line(&mut self, line: &str) -> Result<(), String> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Ok(());
        }
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        let key = |text: &str| {
            text.parse::<u32>()
                .map_err(|_| "the key is not a number".to_string())
        };
        let round = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| "the round is not a number".to_string())
        };
        // An acknowledgement may end with the durable marker.
        let (fields, durable) = match fields[..] {
            [ref rest @ .., "durable"] if matches!(rest.first(), Some(&"w") | Some(&"d")) => {
                (rest, true)
            }
            ref all => (all, false),
        };
        match *fields {
            ["i", k, r] => {
                let (k, r) = (key(k)?, round(r)?);
                self.keys.entry(k).or_default().intended.push(r);
            }
            ["x", k] => self.keys.entry(key(k)?).or_default().delete_intents += 1,
            ["w", k, r, g] => {
                let (k, r, g) = (key(k)?, round(r)?, parse_gci(g)?);
                self.acknowledge(k, Some(r), g, durable);
            }
            ["d", k, g] => {
                let (k, g) = (key(k)?, parse_gci(g)?);
                self.acknowledge(k, None, g, durable);
            }
            ["r", g] => self.restarts.push(parse_gci(g)?),
            _ => return Err("not a ledger record".into()),
        }
        Ok(())
    }

    fn acknowledge(&mut self, key: u32, round: Option<u64>, gci: Gci, durable: bool) {
        let restarts_before = self.restarts.len();
        self.keys
            .entry(key)
            .or_default()
            .acknowledged
            .push(Acknowledgement {
                round,
                gci,
                durable,
                restarts_before,
            });
        if durable {
            self.durable_gci = self.durable_gci.max(gci);
        }
    }

    /// One past the highest key in the ledger (0 when empty).
    pub(crate) fn key_end(&self) -> u64 {
        self.keys
            .keys()
            .map(|&key| u64::from(key) + 1)
            .max()
            .unwrap_or(0)
    }

    /// Checks the state of `key` (`Some(round)`: the row's round, `None`:
    /// no row) against the acknowledged writes of GCI <= `restored`, or <=
    /// the highest durable acknowledgement if that is higher.
    pub(crate) fn check(&self, key: u32, state: Option<u64>, restored: Gci) -> Result<(), String> {
        let Some(history) = self.keys.get(&key) else {
            return Ok(());
        };
        let required = restored.max(self.durable_gci);
        // Commits a later restart rolled back never happened (a durable
        // one must survive every restart, so it is never void).
        let void = |acknowledgement: &Acknowledgement| {
            !acknowledgement.durable
                && self.restarts[acknowledgement.restarts_before..]
                    .iter()
                    .any(|&restart| acknowledgement.gci > restart)
        };
        let valid: Vec<(Option<u64>, Gci)> = history
            .acknowledged
            .iter()
            .filter(|acknowledgement| !void(acknowledgement))
            .map(|acknowledgement| (acknowledgement.round, acknowledgement.gci))
            .collect();
        if let Some(round) = state {
            if let Some(lost) = history.acknowledged.iter().find(|acknowledgement| {
                acknowledgement.round == Some(round) && void(acknowledgement)
            }) {
                return Err(format!(
                    "key {key}: row holds the write of round {round:#x} acknowledged in GCI {}, \
                     which a restart rolled back: a change of an incomplete GCI came back",
                    lost.gci
                ));
            }
        }
        let last = valid
            .iter()
            .filter(|(_, gci)| *gci <= required)
            .max_by_key(|(_, gci)| *gci);
        let Some(&(last_round, last_gci)) = last else {
            return Ok(());
        };
        let mut last_write = match last_round {
            Some(round) => format!("the write of round {round:#x} acknowledged in GCI {last_gci}"),
            None => format!("the delete acknowledged in GCI {last_gci}"),
        };
        if last_gci > restored {
            last_write.push_str(&format!(
                " (GCI {} was acknowledged durable, the cluster restored only {restored})",
                self.durable_gci
            ));
        }
        let acknowledged_since = |wanted: Option<u64>| {
            valid
                .iter()
                .any(|&(round, gci)| round == wanted && gci >= last_gci)
        };
        match state {
            Some(round) => {
                // Nothing of a GCI above the restored one may come back: a
                // restart replays redo only up to the restored GCI.
                if let Some(&(_, beyond)) = valid
                    .iter()
                    .find(|&&(acknowledged, gci)| acknowledged == Some(round) && gci > required)
                {
                    return Err(format!(
                        "key {key}: row holds the write of round {round:#x} acknowledged in GCI \
                         {beyond}, beyond the restored GCI {restored}: a change of an \
                         incomplete GCI came back"
                    ));
                }
                if acknowledged_since(Some(round)) {
                    return Ok(());
                }
                if let Some(&(_, older)) = valid
                    .iter()
                    .find(|(acknowledged, _)| *acknowledged == Some(round))
                {
                    return Err(format!(
                        "key {key}: row holds the write of round {round:#x} (GCI {older}), \
                         older than {last_write}"
                    ));
                }
                if history.intended.contains(&round) {
                    // Sent, outcome unknown: it may have committed after.
                    return Ok(());
                }
                Err(format!(
                    "key {key}: row holds round {round:#x}, which no write in the ledger \
                     made; expected {last_write} or later"
                ))
            }
            None => {
                let deletes = history
                    .acknowledged
                    .iter()
                    .filter(|acknowledgement| acknowledgement.round.is_none())
                    .count();
                if acknowledged_since(None) || history.delete_intents as usize > deletes {
                    return Ok(());
                }
                Err(format!(
                    "key {key}: row missing, expected {last_write} or later"
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ledger(text: &str) -> Ledger {
        let mut ledger = Ledger::default();
        for line in text.lines() {
            ledger.add_line(line).expect("valid line");
        }
        ledger
    }

    const ALL: Gci = Gci(u64::MAX);

    #[test]
    fn gcis_parse_as_high_low_or_whole_checkpoints() {
        assert_eq!(parse_gci("5/3"), Ok(Gci::from_parts(5, 3)));
        assert_eq!(parse_gci("5"), Ok(Gci::from_parts(5, u32::MAX)));
        assert!(parse_gci("5/x").is_err());
        assert!(parse_gci("").is_err());
        assert_eq!(
            parse_gci(&Gci::from_parts(9, 1).to_string()),
            Ok(Gci::from_parts(9, 1))
        );
    }

    #[test]
    fn the_last_acknowledged_write_up_to_the_restored_gci_must_be_visible() {
        let ledger = ledger(
            "# two writes to key 1, one unacknowledged write, a delete of key 2\n\
             i 1 10\nw 1 10 3/0\ni 1 11\nw 1 11 5/0\ni 1 12\n\
             i 2 20\nw 2 20 3/0\nx 2\nd 2 4/1\n",
        );
        // Restored to 4/9: the write of round 10 (3/0) is the last required.
        let g4 = Gci::from_parts(4, 9);
        assert_eq!(ledger.check(1, Some(10), g4), Ok(()));
        let beyond = ledger.check(1, Some(11), g4).unwrap_err();
        assert!(
            beyond.contains("beyond the restored GCI"),
            "a write of GCI 5/0 came back after a restore to 4/9: {beyond}"
        );
        assert_eq!(ledger.check(1, Some(12), g4), Ok(()), "unknown outcome");
        let missing = ledger.check(1, None, g4).unwrap_err();
        assert!(
            missing.contains("row missing") && missing.contains("3/0"),
            "{missing}"
        );
        // Restored to everything: round 10 is now older than round 11.
        let older = ledger.check(1, Some(10), ALL).unwrap_err();
        assert!(
            older.contains("older than the write of round 0xb"),
            "{older}"
        );
        assert_eq!(ledger.check(1, Some(11), ALL), Ok(()));
        let unknown = ledger.check(1, Some(99), ALL).unwrap_err();
        assert!(unknown.contains("no write in the ledger"), "{unknown}");
        // Key 2: deleted in 4/1.
        assert_eq!(ledger.check(2, None, ALL), Ok(()));
        assert!(
            ledger.check(2, Some(20), ALL).is_err(),
            "the delete was lost"
        );
        assert_eq!(ledger.check(2, Some(20), Gci::from_parts(4, 0)), Ok(()));
        // Nothing required before the first acknowledgement, or for other keys.
        assert_eq!(ledger.check(1, None, Gci::from_parts(2, 0)), Ok(()));
        assert_eq!(ledger.check(7, Some(1), ALL), Ok(()));
        assert_eq!(ledger.key_end(), 3);
    }

    #[test]
    fn durable_acknowledgements_require_their_writes_beyond_the_restored_gci() {
        let ledger = ledger(
            "i 1 10\nw 1 10 3/0\ni 1 11\nw 1 11 5/0 durable\n\
             i 2 20\nw 2 20 4/0\ni 3 30\nw 3 30 6/0\nx 4\nd 4 2/0 durable\n",
        );
        let g3 = Gci::from_parts(3, 9);
        // Restored to 3/9, but 5/0 was acknowledged durable: key 1 must
        // hold round 11, and key 2 (4/0, not marked, yet below 5/0) too.
        let lost = ledger.check(1, Some(10), g3).unwrap_err();
        assert!(
            lost.contains("round 0xb") && lost.contains("acknowledged durable"),
            "{lost}"
        );
        assert_eq!(ledger.check(1, Some(11), g3), Ok(()));
        assert!(ledger.check(2, None, g3).is_err(), "4/0 is below 5/0");
        // Key 3 (6/0) is beyond every durable acknowledgement.
        assert_eq!(ledger.check(3, None, g3), Ok(()));
        assert_eq!(ledger.check(4, None, g3), Ok(()));
        // Restored beyond: nothing changes for a correct cluster.
        assert_eq!(ledger.check(1, Some(11), ALL), Ok(()));
        assert_eq!(ledger.check(3, Some(30), ALL), Ok(()));
    }

    #[test]
    fn buffers_mark_durable_acknowledgements() {
        let path = std::env::temp_dir().join(format!("ledger-durable-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let file = LedgerFile::open(&path).expect("open");
        let mut buffer = LedgerBuffer::new(&file);
        buffer.acknowledged_write(1, 7, Gci::from_parts(2, 0), true);
        buffer.acknowledged_write(2, 8, Gci::from_parts(3, 0), false);
        buffer.acknowledged_delete(3, Gci::from_parts(4, 1), true);
        drop(buffer);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, "w 1 7 2/0 durable\nw 2 8 3/0\nd 3 4/1 durable\n");
        let ledger = Ledger::load(&path).expect("loads");
        assert_eq!(ledger.durable_gci, Gci::from_parts(4, 1));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_restart_line_voids_the_commits_it_rolled_back() {
        // Run 1 acknowledged 2/10 and 3/4; the restart restored 2/19, so
        // 3/4 is void; run 2 (GCIs from 5/0 on) acknowledged 5/3.
        let ledger = ledger(
            "i 1 10\nw 1 10 2/10\ni 1 11\nw 1 11 3/4\nr 2/19\n\
             i 2 20\nw 2 20 3/1\nr 2/19\ni 2 21\nw 2 21 5/3\n",
        );
        let later = Gci::from_parts(6, 19);
        assert_eq!(ledger.check(1, Some(10), later), Ok(()));
        let back = ledger.check(1, Some(11), later).unwrap_err();
        assert!(back.contains("a restart rolled back"), "{back}");
        // Key 2: 3/1 was rolled back by the second restart, 5/3 stands.
        assert_eq!(ledger.check(2, Some(21), later), Ok(()));
        assert!(ledger.check(2, Some(20), later).is_err());
        let missing = ledger.check(2, None, later).unwrap_err();
        assert!(missing.contains("5/3"), "{missing}");
        // Without the restart lines, 3/4 would be required.
        let plain = super::tests::ledger("i 1 10\nw 1 10 2/10\ni 1 11\nw 1 11 3/4\n");
        assert!(plain.check(1, Some(10), later).is_err());
    }

    #[test]
    fn a_delete_of_unknown_outcome_excuses_a_missing_row() {
        let ledger = ledger("i 1 10\nw 1 10 3/0\nx 1\n");
        assert_eq!(ledger.check(1, None, ALL), Ok(()));
        assert_eq!(ledger.check(1, Some(10), ALL), Ok(()));
    }

    #[test]
    fn bad_lines_are_named() {
        let mut ledger = Ledger::default();
        for bad in [
            "w 1 2",
            "i x 2",
            "w 1 2 3/y",
            "z 1",
            "d 1 2/",
            "i 1 2 durable",
            "w 1 2 durable",
            "w 1 2 3/0 durable durable",
            "durable",
        ] {
            assert!(ledger.add_line(bad).is_err(), "{bad}");
        }
        let path = std::env::temp_dir().join(format!("ledger-bad-{}.txt", std::process::id()));
        std::fs::write(&path, "i 1 2\nnonsense\n").expect("write");
        let error = Ledger::load(&path).unwrap_err();
        assert!(error.contains("line 2"), "{error}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn buffers_append_whole_lines_and_loads_read_them_back() {
        let path = std::env::temp_dir().join(format!("ledger-rw-{}.txt", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let file = LedgerFile::open(&path).expect("open");
        std::thread::scope(|scope| {
            for thread in 0..4u32 {
                let file = &file;
                scope.spawn(move || {
                    let mut buffer = LedgerBuffer::new(file);
                    for key in thread * 1000..thread * 1000 + 1000 {
                        buffer.intend_write(key, u64::from(key) + 1);
                        buffer.flush();
                        buffer.acknowledged_write(
                            key,
                            u64::from(key) + 1,
                            Gci::from_parts(7, key),
                            false,
                        );
                    }
                });
            }
        });
        let ledger = Ledger::load(&path).expect("loads");
        assert_eq!(ledger.key_end(), 4000);
        for key in 0..4000u32 {
            assert_eq!(ledger.check(key, Some(u64::from(key) + 1), ALL), Ok(()));
            assert!(ledger.check(key, None, ALL).is_err());
        }
        let _ = std::fs::remove_file(&path);
    }
}
