//! Fault points (NDB's error inserts): the named steps of the protocols
//! where a test can make a data node crash. The vocabulary lives here so
//! that mgmd can check a name; arming and firing are `kernel::faults`'.

macro_rules! fault_points {
    ($($(#[$doc:meta])* $name:ident = $number:literal, $text:literal;)*) => {
        /// A named step of a protocol where a test may crash the node.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum FaultPoint {
            $($(#[$doc])* $name = $number,)*
        }

        impl FaultPoint {
            /// Every point.
            pub const ALL: &'static [FaultPoint] = &[$(FaultPoint::$name,)*];

            /// The point's name, as the management protocol spells it.
            pub fn name(self) -> &'static str {
                match self {
                    $(FaultPoint::$name => $text,)*
                }
            }
        }
    };
}

fault_points! {
    /// A tc decided to commit a transaction (every operation prepared) and
    /// has sent no COMMIT yet.
    TcAfterPrepare = 1, "TC_AFTER_PREPARE";
    /// A tc sent the COMMIT of a transaction's first operation only.
    TcAfterFirstCommit = 2, "TC_AFTER_FIRST_COMMIT";
    /// Every operation of a transaction committed; the tc has sent no
    /// COMPLETE yet (the client may have its answer).
    TcBeforeComplete = 3, "TC_BEFORE_COMPLETE";
    /// The master dih sent GCP_PREPARE to every tc (some hold commit
    /// decisions) and no GCP_COMMIT.
    GcpAfterPrepare = 4, "GCP_AFTER_PREPARE";
    /// The master dih sent GCP_COMMIT to every tc, and the switch is not
    /// confirmed.
    GcpAfterCommit = 5, "GCP_AFTER_COMMIT";
    /// The master dih has every ldm's markers of a global checkpoint saved
    /// and sent no COPY_GCI (the system files do not record it).
    GcpBeforeCopy = 6, "GCP_BEFORE_COPY";
}

impl FaultPoint {
    /// The point named `name` (any case).
    pub fn parse(name: &str) -> Option<FaultPoint> {
        FaultPoint::ALL
            .iter()
            .copied()
            .find(|point| point.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// The error for an unknown point name.
pub fn unknown(name: &str) -> String {
    let known: Vec<&str> = FaultPoint::ALL.iter().map(|point| point.name()).collect();
    format!(
        "unknown fault point {:?}; the points are {}",
        name.trim(),
        known.join(", ")
    )
}
