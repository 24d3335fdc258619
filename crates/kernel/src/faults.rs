//! Fault points (NDB's error inserts): named places inside the protocols
//! where a test can make the node crash, to check what the survivors make
//! of a failure at exactly that step (docs/design/testing.md).
//!
//! A block marks each point with [`crate::Context::fault_point`]. Nothing
//! happens unless the point is armed: in production through the
//! management protocol (`tessera mgm -e "node 3 fault TC_AFTER_FIRST_COMMIT"`)
//! or the environment of the process (`TESSERA_FAULT_POINTS`, a comma
//! list, for points reached during the start); in the simulator from the
//! test or the seed. An armed point fires once, with its action: the
//! node crashes there (production: the process aborts, sending nothing
//! more; the simulator: the node is killed), as a power loss at that step
//! would; or it stalls there for a while (production: the block thread
//! sleeps; the simulator: the node is paused, what it sent in that step
//! leaving when it runs again), then goes on.

use std::sync::atomic::{AtomicU64, Ordering};

pub use signal::faults::{unknown, FaultAction, FaultPoint};

/// Per point: 0 when not armed, 1 when armed to crash, 2 + MS when armed
/// to delay MS milliseconds. One data node per process in production.
static ARMED: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

fn slot(point: FaultPoint) -> &'static AtomicU64 {
    &ARMED[point as usize % ARMED.len()]
}

/// Arms `point`: the next time this process reaches it, it crashes.
pub fn arm(point: FaultPoint) {
    arm_with(point, FaultAction::Crash);
}

/// Arms `point` with `action` (replacing what was armed there).
pub fn arm_with(point: FaultPoint, action: FaultAction) {
    let value = match action {
        FaultAction::Crash => 1,
        FaultAction::Delay { ms } => 2 + ms,
    };
    slot(point).store(value, Ordering::SeqCst);
}

/// What `point` is armed with, disarming it (it fires once).
pub fn take(point: FaultPoint) -> Option<FaultAction> {
    let slot = slot(point);
    // Points sit on hot paths (every commit passes the tc's): a plain load
    // keeps the shared line unwritten while nothing is armed.
    if slot.load(Ordering::Relaxed) == 0 {
        return None;
    }
    match slot.swap(0, Ordering::SeqCst) {
        0 => None,
        1 => Some(FaultAction::Crash),
        value => Some(FaultAction::Delay { ms: value - 2 }),
    }
}

/// Arms the points listed in `TESSERA_FAULT_POINTS`: a comma list of
/// `NAME` (crash there) or `NAME:MS` (stall there MS milliseconds); an
/// unknown name or a bad delay is an error saying what is known.
pub fn arm_from_environment() -> Result<(), String> {
    let Ok(list) = std::env::var("TESSERA_FAULT_POINTS") else {
        return Ok(());
    };
    for entry in list.split(',').filter(|entry| !entry.trim().is_empty()) {
        let (name, action) = entry.split_once(':').unwrap_or((entry, ""));
        let point = FaultPoint::parse(name).ok_or_else(|| unknown(name))?;
        let action = FaultAction::parse(action)
            .map_err(|error| format!("TESSERA_FAULT_POINTS entry {entry:?}: {error}"))?;
        arm_with(point, action);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_are_refused() {
        for &point in FaultPoint::ALL {
            assert_eq!(FaultPoint::parse(point.name()), Some(point));
            assert_eq!(FaultPoint::parse(&point.name().to_lowercase()), Some(point));
        }
        assert_eq!(FaultPoint::parse("NO_SUCH_POINT"), None);
        assert!(unknown("x").contains("TC_AFTER_FIRST_COMMIT"));
    }

    #[test]
    fn an_armed_point_fires_once_with_its_action() {
        let point = FaultPoint::GcpBeforeCopy;
        assert_eq!(take(point), None);
        arm(point);
        assert_eq!(take(point), Some(FaultAction::Crash));
        assert_eq!(take(point), None);
        let delay = FaultAction::Delay { ms: 250 };
        arm_with(point, delay);
        assert_eq!(take(point), Some(delay));
        assert_eq!(take(point), None);
    }

    #[test]
    fn actions_parse_and_bad_ones_are_refused() {
        assert_eq!(FaultAction::parse(""), Ok(FaultAction::Crash));
        assert_eq!(FaultAction::parse("crash"), Ok(FaultAction::Crash));
        assert_eq!(
            FaultAction::parse("delay 300"),
            Ok(FaultAction::Delay { ms: 300 })
        );
        assert_eq!(
            FaultAction::parse("300"),
            Ok(FaultAction::Delay { ms: 300 })
        );
        for bad in [
            "delay",
            "delay 0",
            "delay x",
            "delay 700000",
            "stall 3",
            "1 2 3",
        ] {
            assert!(FaultAction::parse(bad).is_err(), "{bad}");
        }
    }
}
