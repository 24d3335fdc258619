//! Fault points (NDB's error inserts): named places inside the protocols
//! where a test can make the node crash, to check what the survivors make
//! of a failure at exactly that step (docs/design/testing.md).
//!
//! A block marks each point with [`crate::Context::fault_point`]. Nothing
//! happens unless the point is armed: in production through the
//! management protocol (`tessera mgm -e "node 3 fault TC_AFTER_FIRST_COMMIT"`)
//! or the environment of the process (`TESSERA_FAULT_POINTS`, a comma
//! list, for points reached during the start); in the simulator from the
//! test or the seed. An armed point fires once: the node crashes there
//! (production: the process aborts, sending nothing more; the simulator:
//! the node is killed), as a power loss at that step would.

use std::sync::atomic::{AtomicU64, Ordering};

pub use signal::faults::{unknown, FaultPoint};

fn bit(point: FaultPoint) -> u64 {
    1 << (point as u8)
}

/// The points armed in this process (production: one data node per
/// process).
static ARMED: AtomicU64 = AtomicU64::new(0);

/// Arms `point`: the next time this process reaches it, it crashes.
pub fn arm(point: FaultPoint) {
    ARMED.fetch_or(bit(point), Ordering::SeqCst);
}

/// Whether `point` is armed, disarming it (it fires once).
pub fn take(point: FaultPoint) -> bool {
    ARMED.fetch_and(!bit(point), Ordering::SeqCst) & bit(point) != 0
}

/// Arms the points listed in `TESSERA_FAULT_POINTS` (comma separated);
/// an unknown name is an error naming the known ones.
pub fn arm_from_environment() -> Result<(), String> {
    let Ok(list) = std::env::var("TESSERA_FAULT_POINTS") else {
        return Ok(());
    };
    for name in list.split(',').filter(|name| !name.trim().is_empty()) {
        let point = FaultPoint::parse(name).ok_or_else(|| unknown(name))?;
        arm(point);
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
    fn an_armed_point_fires_once() {
        let point = FaultPoint::GcpBeforeCopy;
        assert!(!take(point));
        arm(point);
        assert!(take(point));
        assert!(!take(point));
    }
}
