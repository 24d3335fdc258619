//! Live progress of node restarts on a terminal (`tessera demo`, and
//! `tessera mgm -e "node N restart" --wait`): one bar per restarting
//! data node, fed with the node's entry of mgmd's `show` (its
//! `start_phase` and `copy_progress`, docs/mgm-protocol.md) each time
//! the caller looks. The bar counts partitions copied; its message
//! gives the phase, rows and bytes copied, the pace and the time left.
//! Where stderr is not a terminal (a pipe, a test) nothing is drawn.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;
use std::collections::BTreeMap;

/// The bars of the data nodes restarting now.
pub struct RestartProgress {
    bars: MultiProgress,
    by_node: BTreeMap<u16, ProgressBar>,
}

impl RestartProgress {
    /// Bars drawn on stderr, if it is a terminal.
    pub fn new() -> RestartProgress {
        RestartProgress {
            bars: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            by_node: BTreeMap::new(),
        }
    }

    /// One look at data node `id`'s entry of `show`: a bar while it runs
    /// a node restart's phases, finished once it has none.
    pub fn show(&mut self, id: u16, node: &Value) {
        let Some(phase) = node["start_phase"].as_str() else {
            if let Some(bar) = self.by_node.remove(&id) {
                let state = node["state"].as_str().unwrap_or("?");
                bar.finish_with_message(format!("node {id}: {state}"));
            }
            return;
        };
        let bars = &self.bars;
        let bar = self.by_node.entry(id).or_insert_with(|| {
            let bar = bars.add(ProgressBar::new(1));
            bar.set_style(
                ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} partitions  {msg}")
                    .expect("a valid template")
                    .progress_chars("=> "),
            );
            bar
        });
        let copy = &node["copy_progress"];
        if let (Some(copied), Some(partitions)) = (
            copy["partitions_copied"].as_u64(),
            copy["partitions"].as_u64(),
        ) {
            bar.set_length(partitions.max(1));
            bar.set_position(copied);
        }
        bar.set_message(format!("node {id}: {phase}{}", copy_text(copy)));
        bar.tick();
    }

    /// Finishes every bar still drawn.
    pub fn finish(&mut self) {
        for (_, bar) in std::mem::take(&mut self.by_node) {
            bar.finish();
        }
    }
}

impl Default for RestartProgress {
    fn default() -> Self {
        RestartProgress::new()
    }
}

/// A copy's figures, for the bar's message (empty before the copy).
fn copy_text(copy: &Value) -> String {
    let Some(rows) = copy["rows"].as_u64() else {
        return String::new();
    };
    let megabytes = copy["bytes"].as_u64().unwrap_or(0) as f64 / 1e6;
    // The pace and the time left come as numbers with or without a
    // fraction.
    let pace = copy["rows_per_second"].as_f64().unwrap_or(0.0);
    let left = match copy["estimated_seconds_left"].as_f64() {
        Some(seconds) if seconds > 0.0 => format!(", ~{seconds:.0} s left"),
        _ => String::new(),
    };
    format!(": {rows} rows, {megabytes:.1} MB copied, {pace:.0} rows/s{left}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_copy_reads_as_rows_bytes_pace_and_time_left() {
        let copy = json!({"partitions_copied": 3, "partitions": 8, "rows": 120000,
            "bytes": 4500000, "rows_per_second": 900000.0, "bytes_per_second": 1,
            "estimated_seconds_left": 2.4});
        assert_eq!(
            copy_text(&copy),
            ": 120000 rows, 4.5 MB copied, 900000 rows/s, ~2 s left"
        );
        assert_eq!(copy_text(&Value::Null), "");
        // Off a terminal nothing is drawn, and a node's bar comes and goes.
        let mut progress = RestartProgress::new();
        progress.show(
            3,
            &json!({"start_phase": "copy data", "copy_progress": copy}),
        );
        assert_eq!(progress.by_node.len(), 1);
        progress.show(3, &json!({"start_phase": null, "state": "started"}));
        assert!(progress.by_node.is_empty());
    }
}
