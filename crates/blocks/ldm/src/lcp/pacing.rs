//! Adaptive pacing of local checkpoints (seed 003, "Adaptive algorithms in
//! NDB and in cars"): how fast the running LCP may write, decided once per
//! `PERIOD_MS` from what the ldm sees, and enforced per scan slice by a
//! byte credit.
//!
//! ```text
//! inputs (per period)              control
//!   change rate (smoothed)   ->    keep_up = change rate x LCP bytes per
//!   LCP bytes per change byte      changed byte x 2 (at least MIN_SPEED)
//!   redo fill (fullest part)  ->   >= 50% or a refused write: MAX_SPEED at
//!                                  once ("redo full"); 25..50%: keep_up
//!                                  x 1..4 ("redo filling")
//!   thread busy share         ->   >= 80%: keep_up ("busy"); <= 50%: at
//!                                  least IDLE_SPEED ("idle"); between:
//!                                  in proportion ("keep up")
//!   inertia: the speed moves at most x2 or /2 per period, except to
//!   MAX_SPEED when redo is full
//! ```
//!
//! Why these rules. Redo wins over load when they conflict (the seed's two
//! colliding adaptive algorithms): an LCP that falls behind fills the redo
//! log and then every write is refused, which costs more than any slowdown
//! the LCP causes. Under load the LCP never goes below what keeps up with
//! the changes, so it cannot stall; on an idle thread it may use the idle
//! time. The inputs are smoothed and the control changes by at most a
//! factor of two per period, so one noisy second does not swing it
//! (inertia against oscillation); one period is long against a scan slice
//! (hundreds of microseconds) and short against an LCP round (seconds).
//!
//! Pure logic over numbers the ldm passes in: no clock, no context.

use kernel::PacingReport;

/// How often the controls are decided, ms.
pub(crate) const PERIOD_MS: u64 = 1000;
/// The slowest an LCP ever writes, bytes per second.
pub(crate) const MIN_SPEED: u64 = 2 << 20;
/// The least an idle ldm thread lets an LCP write, bytes per second.
pub(crate) const IDLE_SPEED: u64 = 64 << 20;
/// The speed when the redo log is filling up: as fast as the disk takes it.
pub(crate) const MAX_SPEED: u64 = 1 << 30;
/// LCP bytes written per changed byte assumed before any is measured, and
/// the most the measured one is trusted with (a full LCP after a load can
/// write far more per change; keep_up must not jump on one such LCP).
const MAX_WRITE_RATIO: u64 = 16;
/// The most credit saved up: a burst of this many ms at the current speed.
const BURST_MS: u64 = 100;

/// What the ldm saw over the last period.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Inputs {
    pub(crate) now_ms: u64,
    /// Counter: bytes of row changes committed since the start.
    pub(crate) changed_row_bytes: u64,
    /// Counter: bytes written to LCP files since the start.
    pub(crate) lcp_bytes_written: u64,
    /// The fullest redo part of the ldm, percent.
    pub(crate) redo_fill_percent: u32,
    /// A write was refused because a redo part is full.
    pub(crate) log_full: bool,
    /// The ldm thread's busy share, percent (`None`: unknown).
    pub(crate) busy_percent: Option<u32>,
    /// `LcpSettings::recovery_work`.
    pub(crate) recovery_work: u32,
}

/// The controller's state.
pub(crate) struct Pacing {
    speed: u64,
    /// Counters at the previous decision: (ms, changed bytes, LCP bytes).
    previous: Option<(u64, u64, u64)>,
    /// Changed bytes per second, smoothed.
    change_rate: u64,
    /// LCP bytes per changed byte, x100, smoothed.
    write_ratio_percent: u64,
    credit: i64,
    credit_at_ms: u64,
    report: PacingReport,
}

/// Exponential smoothing with weight 1/2 on the new sample.
fn smooth(old: u64, sample: u64) -> u64 {
    old / 2 + sample / 2
}

impl Pacing {
    pub(crate) fn new() -> Pacing {
        Pacing {
            speed: IDLE_SPEED,
            previous: None,
            change_rate: 0,
            write_ratio_percent: 0,
            // A burst's worth to start with: the first LCP need not wait.
            credit: (IDLE_SPEED * BURST_MS / 1000) as i64,
            credit_at_ms: 0,
            report: PacingReport {
                speed_bytes_per_second: IDLE_SPEED,
                keep_up_bytes_per_second: MIN_SPEED,
                reason: "starting",
                ..PacingReport::default()
            },
        }
    }

    /// The controls chosen last.
    pub(crate) fn report(&self) -> PacingReport {
        self.report
    }

    /// The redo log is full: write as fast as possible from now on, without
    /// waiting for the next decision.
    pub(crate) fn redo_full(&mut self) {
        self.full_speed("redo full");
    }

    /// Write as fast as the disk takes it until the next decision, for
    /// `reason`: the redo log is full, or a restarting node checkpoints
    /// every partition before it serves (nothing to leave room for).
    pub(crate) fn full_speed(&mut self, reason: &'static str) {
        self.speed = MAX_SPEED;
        self.credit = self.credit.max((MAX_SPEED * BURST_MS / 1000) as i64);
        self.report.speed_bytes_per_second = MAX_SPEED;
        self.report.reason = reason;
    }

    /// Decides the speed for the next period.
    pub(crate) fn decide(&mut self, inputs: Inputs) -> PacingReport {
        assert!(
            inputs.recovery_work > 0,
            "recovery_work is validated to 25..=100"
        );
        if let Some((at_ms, changed, written)) = self.previous {
            let elapsed_ms = inputs.now_ms.saturating_sub(at_ms).max(1);
            let changed_delta = inputs.changed_row_bytes.saturating_sub(changed);
            let written_delta = inputs.lcp_bytes_written.saturating_sub(written);
            self.change_rate = smooth(self.change_rate, changed_delta * 1000 / elapsed_ms);
            if let Some(ratio) = (written_delta * 100).checked_div(changed_delta) {
                let ratio = ratio.min(MAX_WRITE_RATIO * 100);
                self.write_ratio_percent = smooth(self.write_ratio_percent, ratio);
            }
        }
        self.previous = Some((
            inputs.now_ms,
            inputs.changed_row_bytes,
            inputs.lcp_bytes_written,
        ));
        // Seed 003's model: an LCP writes about 1 + 100 / recovery_work
        // bytes per changed byte; what was measured counts if higher.
        let model_percent = 100 + 10_000 / u64::from(inputs.recovery_work);
        let ratio_percent = self.write_ratio_percent.max(model_percent);
        let keep_up = (self.change_rate.saturating_mul(ratio_percent) / 100)
            .saturating_mul(2)
            .clamp(MIN_SPEED, MAX_SPEED);
        let busy = inputs.busy_percent.unwrap_or(0).min(100);
        let fill = inputs.redo_fill_percent.min(100);
        let (target, reason) = if inputs.log_full || fill >= 50 {
            (MAX_SPEED, "redo full")
        } else if fill >= 25 {
            let factor_percent = 100 + 300 * u64::from(fill - 25) / 25;
            (keep_up * factor_percent / 100, "redo filling")
        } else if busy >= 80 {
            (keep_up, "busy")
        } else if busy <= 50 {
            (keep_up.max(IDLE_SPEED), "idle")
        } else {
            let spare = keep_up.max(IDLE_SPEED) - keep_up;
            (keep_up + spare * u64::from(80 - busy) / 30, "keep up")
        };
        self.speed = if reason == "redo full" {
            target
        } else {
            target.clamp(
                (self.speed / 2).max(MIN_SPEED),
                self.speed.saturating_mul(2),
            )
        }
        .clamp(MIN_SPEED, MAX_SPEED);
        self.report = PacingReport {
            speed_bytes_per_second: self.speed,
            keep_up_bytes_per_second: keep_up,
            change_bytes_per_second: self.change_rate,
            redo_fill_percent: fill,
            busy_percent: busy,
            reason,
        };
        self.report
    }

    /// Whether the running LCP may write more now; else how many ms until
    /// it may. Credit accrues at the current speed, up to a short burst.
    pub(crate) fn may_write(&mut self, now_ms: u64) -> Result<(), u64> {
        let elapsed_ms = now_ms.saturating_sub(self.credit_at_ms);
        self.credit_at_ms = now_ms;
        let speed = self.speed as i64;
        let burst = (self.speed * BURST_MS / 1000) as i64;
        self.credit = self
            .credit
            .saturating_add(speed.saturating_mul(elapsed_ms as i64) / 1000)
            .min(burst);
        if self.credit > 0 {
            Ok(())
        } else {
            let missing = (1 - self.credit) as u64;
            Err((missing * 1000).div_ceil(self.speed).clamp(1, BURST_MS))
        }
    }

    /// The running LCP wrote `bytes`.
    pub(crate) fn spend(&mut self, bytes: u64) {
        self.credit = self.credit.saturating_sub(bytes as i64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(now_ms: u64, changed: u64, written: u64) -> Inputs {
        Inputs {
            now_ms,
            changed_row_bytes: changed,
            lcp_bytes_written: written,
            redo_fill_percent: 0,
            log_full: false,
            busy_percent: Some(90),
            recovery_work: 50,
        }
    }

    #[test]
    fn a_busy_thread_writes_what_keeps_up_with_the_changes() {
        let mut pacing = Pacing::new();
        let mut changed = 0;
        let mut written = 0;
        let mut report = pacing.report();
        for second in 0..20 {
            changed += 10 << 20;
            written += 30 << 20;
            report = pacing.decide(inputs(second * 1000, changed, written));
        }
        assert_eq!(report.reason, "busy");
        // 10 MB/s of changes, 3 bytes written per changed byte, x2.
        let expected = 60u64 << 20;
        assert!(
            report.keep_up_bytes_per_second.abs_diff(expected) < expected / 50,
            "{report:?}"
        );
        assert_eq!(
            report.speed_bytes_per_second,
            report.keep_up_bytes_per_second
        );
    }

    #[test]
    fn the_speed_moves_by_at_most_a_factor_of_two_per_period() {
        let mut pacing = Pacing::new();
        let mut previous = pacing.report().speed_bytes_per_second;
        let mut changed = 0;
        // A load that comes and goes every period.
        for second in 0..30u64 {
            changed += if second % 2 == 0 { 200 << 20 } else { 0 };
            let report = pacing.decide(inputs(second * 1000, changed, changed * 3));
            let speed = report.speed_bytes_per_second;
            assert!(
                speed <= previous * 2 && speed >= (previous / 2).max(MIN_SPEED),
                "second {second}: {previous} -> {speed}"
            );
            previous = speed;
        }
    }

    #[test]
    fn a_filling_redo_log_speeds_up_and_a_full_one_jumps_to_the_maximum() {
        let mut pacing = Pacing::new();
        let mut sample = inputs(0, 0, 0);
        pacing.decide(sample);
        sample.now_ms = 1000;
        sample.redo_fill_percent = 40;
        let filling = pacing.decide(sample);
        assert_eq!(filling.reason, "redo filling");
        sample.now_ms = 2000;
        sample.redo_fill_percent = 60;
        let full = pacing.decide(sample);
        assert_eq!(full.reason, "redo full");
        assert_eq!(full.speed_bytes_per_second, MAX_SPEED);
        // Redo drains: the speed comes down by halves, not at once.
        sample.now_ms = 3000;
        sample.redo_fill_percent = 0;
        let after = pacing.decide(sample);
        assert_eq!(after.speed_bytes_per_second, MAX_SPEED / 2);
    }

    #[test]
    fn an_idle_thread_lets_the_lcp_use_its_idle_time() {
        let mut pacing = Pacing::new();
        let mut sample = inputs(0, 0, 0);
        sample.busy_percent = Some(10);
        let report = pacing.decide(sample);
        assert_eq!(report.reason, "idle");
        assert_eq!(report.speed_bytes_per_second, IDLE_SPEED);
    }

    #[test]
    fn credit_limits_the_bytes_written_per_second() {
        let mut pacing = Pacing::new();
        let mut sample = inputs(0, 0, 0);
        sample.busy_percent = Some(95);
        // Settle at MIN_SPEED: no changes, busy.
        for second in 0..10 {
            sample.now_ms = second * 1000;
            pacing.decide(sample);
        }
        assert_eq!(pacing.report().speed_bytes_per_second, MIN_SPEED);
        // Over 10 simulated seconds, write in 64 KiB steps whenever allowed.
        let start = 10_000;
        let mut now = start;
        let mut written = 0u64;
        while now < start + 10_000 {
            match pacing.may_write(now) {
                Ok(()) => {
                    pacing.spend(64 << 10);
                    written += 64 << 10;
                }
                Err(wait_ms) => now += wait_ms,
            }
        }
        let expected = MIN_SPEED * 10;
        assert!(
            written.abs_diff(expected) <= expected / 20,
            "{written} bytes in 10 s at {MIN_SPEED} B/s"
        );
    }
}
