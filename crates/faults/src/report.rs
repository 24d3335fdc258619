//! What a run leaves behind, in its report directory: each workload's
//! history (`history-<workload>.jsonl`), the nemesis log
//! (`nemesis.log`), every process's log (written there as they ran),
//! `summary.json` (the object `--json` prints) and `timeline.png`:
//! throughput (successful operations per second, blue) and latency
//! (median green, maximum red, log scale from 0.1 ms to 10 s) per
//! 100 ms, with each fault's window shaded from its start until the
//! cluster healed (kill red, pause yellow, partition blue, mgmd kill
//! purple, rolling restart green, whole-cluster kill grey, slow link
//! orange). Numbers on
//! the chart: the throughput axis's top (ops/s), the latency grid lines
//! (1, 10, 100, 1000 ms) and seconds along the time axis.

use crate::history::Op;
use crate::nemesis::Kind;
use crate::png::{draw_digits, Image};
use crate::recovery::{self, Recovery};
use crate::run::RunReport;
use crate::workload::Workload;
use serde_json::{json, Value as Json};
use std::io::Write;
use std::path::Path;

/// The client operations that succeeded, as (call, completion) times.
pub fn ok_operations(report: &RunReport) -> Vec<(u64, u64)> {
    report
        .workloads
        .iter()
        .flat_map(|workload| {
            crate::history::pair(&workload.history)
                .unwrap_or_default()
                .into_iter()
                .filter(|operation| {
                    operation.completion == crate::history::Completion::Ok
                        && operation.process < crate::run::HARNESS_PROCESS
                })
                .map(|operation| (operation.call, operation.ret))
        })
        .collect()
}

/// The summary object (`--json`'s last line).
pub fn summary(report: &RunReport, recoveries: &[Recovery]) -> Json {
    let mut workloads = serde_json::Map::new();
    for workload in &report.workloads {
        workloads.insert(
            workload.workload.name().into(),
            json!({
                "valid": workload.verdict.valid,
                "ok": workload.ok,
                "fail": workload.fail,
                "info": workload.info,
                "anomalies": workload.verdict.anomaly.iter().collect::<Vec<_>>(),
            }),
        );
    }
    let mut nemeses = serde_json::Map::new();
    for (kind, count) in report.counts() {
        nemeses.insert(kind.name().into(), count.into());
    }
    let mut recovery = serde_json::Map::new();
    for (kind, (faults, first_ok, gap, full, during)) in recovery::summarize(recoveries) {
        let spread = |spread: recovery::Spread| json!([spread.min, spread.median, spread.max]);
        recovery.insert(
            kind.name().into(),
            json!({
                "faults": faults,
                "first_ok_ms": spread(first_ok),
                "longest_gap_ms": spread(gap),
                "full_throughput_ms": spread(full),
                "throughput_during": spread(during),
            }),
        );
    }
    json!({
        "valid": report.valid(),
        "seed": report.options.seed,
        "schedule": report.options.schedule.name(),
        "seconds": report.duration as f64 / 1e9,
        "healed": report.healed,
        "replicas": {
            "valid": report.replicas.valid,
            "rows": report.replicas.operations,
            "anomalies": report.replicas.anomaly.iter().collect::<Vec<_>>(),
        },
        "workloads": workloads,
        "nemeses": nemeses,
        "recovery": recovery,
    })
}

/// Writes `workload`'s history into the report directory `dir`, one
/// JSON line per record (the run does, before checking it).
pub fn save_history(dir: &Path, workload: Workload, ops: &[Op]) -> Result<(), String> {
    let path = dir.join(format!("history-{}.jsonl", workload.name()));
    let file =
        std::fs::File::create(&path).map_err(|error| format!("{}: {error}", path.display()))?;
    let mut writer = std::io::BufWriter::new(file);
    for op in ops {
        writeln!(writer, "{}", op.to_line())
            .map_err(|error| format!("{}: {error}", path.display()))?;
    }
    writer
        .flush()
        .map_err(|error| format!("{}: {error}", path.display()))
}

/// Writes the nemesis log, the summary and the timeline (the run wrote
/// the histories).
pub fn write(report: &RunReport, summary: &Json) -> Result<(), String> {
    let dir = &report.options.dir;
    let save = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|error| format!("{}: {error}", path.display()))
    };
    save("nemesis.log", (report.nemesis.join("\n") + "\n").as_bytes())?;
    save("summary.json", (summary.to_string() + "\n").as_bytes())?;
    save("timeline.png", &timeline(report))
}

const WHITE: u8 = 0;
const BLACK: u8 = 1;
const GRID: u8 = 2;
const THROUGHPUT: u8 = 3;
const LATENCY_MAX: u8 = 4;
const LATENCY_MEDIAN: u8 = 5;

fn shade(kind: Kind) -> u8 {
    6 + kind as u8
}

const PALETTE: [[u8; 3]; 13] = [
    [255, 255, 255],
    [0, 0, 0],
    [215, 215, 215],
    [40, 90, 200],
    [210, 40, 40],
    [30, 140, 60],
    [255, 205, 205], // kill
    [255, 240, 170], // pause
    [200, 220, 255], // partition
    [230, 205, 250], // kill-mgmd
    [205, 240, 205], // rolling-restart
    [225, 225, 225], // cluster-kill
    [255, 225, 190], // slow-link
];

/// The timeline chart as a PNG file.
pub fn timeline(report: &RunReport) -> Vec<u8> {
    const WIDTH: usize = 1400;
    const LEFT: i64 = 70;
    const PLOT_WIDTH: i64 = 1300;
    const PANEL: i64 = 180;
    const TOP: i64 = 20;
    const GAP: i64 = 40;
    let height = (TOP + PANEL + GAP + PANEL + 40) as usize;
    let mut image = Image::new(WIDTH, height, WHITE);
    let duration = report.duration.max(1);
    let x_of = |time: u64| LEFT + (time as f64 / duration as f64 * PLOT_WIDTH as f64) as i64;
    let panels = [TOP, TOP + PANEL + GAP];
    for window in &report.windows {
        let (x0, x1) = (
            x_of(window.start),
            x_of(window.healed.unwrap_or(report.duration)),
        );
        for top in panels {
            image.fill(
                x0,
                top,
                x1.max(x0 + 1),
                top + PANEL,
                shade(window.fault.kind()),
            );
        }
    }
    // Per pixel column: successful operations and their latencies.
    let columns = PLOT_WIDTH as usize;
    let mut counts = vec![0u64; columns];
    let mut latencies: Vec<Vec<u64>> = vec![Vec::new(); columns];
    for (call, ret) in ok_operations(report) {
        let column = ((ret as f64 / duration as f64) * columns as f64) as usize;
        if column < columns {
            counts[column] += 1;
            latencies[column].push(ret - call);
        }
    }
    let column_seconds = duration as f64 / 1e9 / columns as f64;
    let rates: Vec<f64> = counts
        .iter()
        .map(|&count| count as f64 / column_seconds)
        .collect();
    let top_rate = rates.iter().copied().fold(1.0, f64::max);
    for (column, rate) in rates.iter().enumerate() {
        let bar = (rate / top_rate * PANEL as f64) as i64;
        let x = LEFT + column as i64;
        image.fill(x, TOP + PANEL - bar, x + 1, TOP + PANEL, THROUGHPUT);
    }
    draw_digits(
        &mut image,
        4,
        TOP,
        &format!("{}", top_rate.round() as u64),
        2,
        BLACK,
    );
    // Latency: log10(ms) from -1 (0.1 ms) to 4 (10 s).
    let latency_top = panels[1];
    let y_of = |nanos: u64| {
        let log = (nanos.max(1) as f64 / 1e6).log10().clamp(-1.0, 4.0);
        latency_top + PANEL - ((log + 1.0) / 5.0 * PANEL as f64) as i64
    };
    for (exponent, label) in [(0, "1"), (1, "10"), (2, "100"), (3, "1000")] {
        let y = y_of(10u64.pow(exponent) * 1_000_000);
        for x in (LEFT..LEFT + PLOT_WIDTH).step_by(4) {
            image.set(x, y, GRID);
        }
        draw_digits(&mut image, 4, y - 5, label, 2, BLACK);
    }
    for (column, values) in latencies.iter_mut().enumerate() {
        if values.is_empty() {
            continue;
        }
        values.sort_unstable();
        let x = LEFT + column as i64;
        let (median, max) = (values[values.len() / 2], values[values.len() - 1]);
        image.fill(x, y_of(max) - 1, x + 1, y_of(max) + 1, LATENCY_MAX);
        image.fill(x, y_of(median) - 1, x + 1, y_of(median) + 1, LATENCY_MEDIAN);
    }
    // Axes and seconds along the bottom.
    for top in panels {
        image.fill(LEFT - 1, top, LEFT, top + PANEL + 1, BLACK);
        image.fill(
            LEFT - 1,
            top + PANEL,
            LEFT + PLOT_WIDTH,
            top + PANEL + 1,
            BLACK,
        );
    }
    let seconds = duration as f64 / 1e9;
    let step = [1u64, 5, 10, 30, 60, 300, 600]
        .into_iter()
        .find(|&step| seconds / step as f64 <= 12.0)
        .unwrap_or(1200);
    let bottom = latency_top + PANEL;
    let mut tick = 0;
    while (tick as f64) <= seconds {
        let x = x_of(tick * 1_000_000_000);
        image.fill(x, bottom, x + 1, bottom + 6, BLACK);
        draw_digits(&mut image, x - 3, bottom + 10, &tick.to_string(), 2, BLACK);
        tick += step;
    }
    image.encode(&PALETTE)
}

/// The summary's recovery figures as text lines.
pub fn recovery_lines(summary: &Json) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(recovery) = summary["recovery"].as_object() {
        for (kind, figures) in recovery {
            let spread = |name: &str| {
                let values: Vec<String> = figures[name]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|value| match value.as_f64() {
                        Some(number) => format!("{number:.0}"),
                        None => "-".into(),
                    })
                    .collect();
                values.join("/")
            };
            let during: Vec<String> = figures["throughput_during"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|value| {
                    value
                        .as_f64()
                        .map_or("-".into(), |ratio| format!("{ratio:.2}"))
                })
                .collect();
            lines.push(format!(
                "recovery {kind} ({} faults; min/median/max): first ok {} ms, longest gap {} ms, \
                 full throughput {} ms, throughput during {} of before",
                figures["faults"],
                spread("first_ok_ms"),
                spread("longest_gap_ms"),
                spread("full_throughput_ms"),
                during.join("/")
            ));
        }
    }
    lines
}

/// Whether `dir` can take a new report (absent, or an empty directory).
pub fn usable_dir(dir: &Path) -> Result<(), String> {
    match std::fs::read_dir(dir) {
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(format!("{}: {error}", dir.display())),
        Ok(entries) => match entries.count() {
            0 => Ok(()),
            _ => Err(format!(
                "{} is not empty: give a new --report directory (a run keeps its logs there)",
                dir.display()
            )),
        },
    }
}
