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
//! i <key> <round>          a write of <round> to <key> is about to be sent
//! x <key>                  a delete of <key> is about to be sent
//! w <key> <round> <H>/<L>  the write of <round> to <key> committed in GCI H/L
//! d <key> <H>/<L>          a delete of <key> committed in GCI H/L
//! # ...                    a comment
//! ```
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
//! holding an older acknowledged write, a round the ledger never saw, or
//! missing where a write must be, fails.

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

    /// The write of `round` to `key` committed in `gci`.
    pub(crate) fn acknowledged_write(&mut self, key: u32, round: u64, gci: Gci) {
        let _ = writeln!(self.text, "w {key} {round} {gci}");
        self.flush_if_full();
    }

    /// A delete of `key` committed in `gci`.
    pub(crate) fn acknowledged_delete(&mut self, key: u32, gci: Gci) {
        let _ = writeln!(self.text, "d {key} {gci}");
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
    acknowledged: Vec<(Option<u64>, Gci)>,
    /// Delete intents.
    delete_intents: u32,
}

/// A loaded ledger, for checking rows.
#[derive(Default, Debug)]
pub(crate) struct Ledger {
    keys: HashMap<u32, KeyHistory>,
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
        match fields[..] {
            ["i", k, r] => {
                let (k, r) = (key(k)?, round(r)?);
                self.keys.entry(k).or_default().intended.push(r);
            }
            ["x", k] => self.keys.entry(key(k)?).or_default().delete_intents += 1,
            ["w", k, r, g] => {
                let (k, r, g) = (key(k)?, round(r)?, parse_gci(g)?);
                self.keys
                    .entry(k)
                    .or_default()
                    .acknowledged
                    .push((Some(r), g));
            }
            ["d", k, g] => {
                let (k, g) = (key(k)?, parse_gci(g)?);
                self.keys.entry(k).or_default().acknowledged.push((None, g));
            }
            _ => return Err("not a ledger record".into()),
        }
        Ok(())
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
    /// no row) against the acknowledged writes of GCI <= `restored`.
    pub(crate) fn check(&self, key: u32, state: Option<u64>, restored: Gci) -> Result<(), String> {
        let Some(history) = self.keys.get(&key) else {
            return Ok(());
        };
        let last = history
            .acknowledged
            .iter()
            .filter(|(_, gci)| *gci <= restored)
            .max_by_key(|(_, gci)| *gci);
        let Some(&(last_round, last_gci)) = last else {
            return Ok(());
        };
        let last_write = match last_round {
            Some(round) => format!("the write of round {round:#x} acknowledged in GCI {last_gci}"),
            None => format!("the delete acknowledged in GCI {last_gci}"),
        };
        let acknowledged_since = |wanted: Option<u64>| {
            history
                .acknowledged
                .iter()
                .any(|&(round, gci)| round == wanted && gci >= last_gci)
        };
        match state {
            Some(round) => {
                if acknowledged_since(Some(round)) {
                    return Ok(());
                }
                if let Some(&(_, older)) = history
                    .acknowledged
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
                    .filter(|(round, _)| round.is_none())
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
        assert_eq!(ledger.check(1, Some(11), g4), Ok(()), "a later write");
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
    fn a_delete_of_unknown_outcome_excuses_a_missing_row() {
        let ledger = ledger("i 1 10\nw 1 10 3/0\nx 1\n");
        assert_eq!(ledger.check(1, None, ALL), Ok(()));
        assert_eq!(ledger.check(1, Some(10), ALL), Ok(()));
    }

    #[test]
    fn bad_lines_are_named() {
        let mut ledger = Ledger::default();
        for bad in ["w 1 2", "i x 2", "w 1 2 3/y", "z 1", "d 1 2/"] {
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
                        buffer.acknowledged_write(key, u64::from(key) + 1, Gci::from_parts(7, key));
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
