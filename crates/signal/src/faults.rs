//! Fault points (NDB's error inserts): the named steps of the protocols
//! where a test can make a data node crash or stall. The vocabulary lives
//! here so that mgmd can check a name; arming and firing are
//! `kernel::faults`'.

macro_rules! fault_points {
    ($($(#[$doc:meta])* $name:ident = $number:literal, $text:literal;)*) => {
        /// A named step of a protocol where a test may crash or stall the node.
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
    /// The president sent CM_FAIL_PREPARE_REQ of a new membership to every
    /// proposed member, and nothing more (step one of agreeing a failure).
    FailureAfterPrepare = 7, "FAILURE_AFTER_PREPARE";
    /// The president sent CM_FAIL_COMMIT_ORD to every member (step two:
    /// some may have installed the membership, some not).
    FailureAfterCommit = 8, "FAILURE_AFTER_COMMIT";
    /// A tc taking over a failed coordinator's transactions asked every
    /// live ldm what it holds of them, and heard nothing yet.
    TakeoverAfterQuery = 9, "TAKEOVER_AFTER_QUERY";
    /// That tc heard every ldm and sent the outcome of the transactions it
    /// took over (commit or abort), none confirmed yet.
    TakeoverAfterDecision = 10, "TAKEOVER_AFTER_DECISION";
    /// A new master dih asked every tc and dih where the GCI switch and
    /// the durability rounds stood (master take-over), and heard nothing.
    MasterTakeoverAfterQuery = 11, "MASTER_TAKEOVER_AFTER_QUERY";
    /// The master dict sent a new table to every tc and ldm, none
    /// confirmed yet (some may hold it, no other dict does).
    CreateAfterAddRequests = 12, "CREATE_AFTER_ADD_REQUESTS";
    /// Every tc and ldm holds the new table and the master dict told one
    /// other dict, the highest (the others, and the next president, not).
    CreateAfterFirstAnnounce = 13, "CREATE_AFTER_FIRST_ANNOUNCE";
    /// Every tc dropped the table; the master dict asked no ldm yet.
    DropAfterCoordinators = 14, "DROP_AFTER_COORDINATORS";
    /// Every tc and ldm dropped the table and the master dict told one
    /// other dict, the highest, to drop it.
    DropAfterFirstDictionary = 15, "DROP_AFTER_FIRST_DICTIONARY";
    /// A copy source (the live primary's ldm in a node restart's copy)
    /// sent a batch of a partition's rows to the restarting node, with
    /// more of the partition to come, and nothing more.
    CopyAfterBatch = 16, "COPY_AFTER_BATCH";
    /// The master dict sent a table's new index to every ldm to build,
    /// none confirmed yet (some may be building it, no dict hands it out).
    IndexAfterBuildRequests = 17, "INDEX_AFTER_BUILD_REQUESTS";
    /// Every ldm built the new index and the master dict told one other
    /// dict, the highest.
    IndexAfterFirstAnnounce = 18, "INDEX_AFTER_FIRST_ANNOUNCE";
    /// The master dict told one other dict, the highest, that an index is
    /// dropped; every ldm still holds it.
    IndexDropAfterFirstDictionary = 19, "INDEX_DROP_AFTER_FIRST_DICTIONARY";
    /// Every tc keeps a new unique index, building, and the master dict
    /// asked its node's tc to build the index's hidden rows (no dict
    /// hands the index out).
    UniqueIndexAfterBuildRequest = 20, "UNIQUE_INDEX_AFTER_BUILD_REQUEST";
}

/// What an armed point does when a node reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// The node crashes there (what it sent before the point leaves it;
    /// nothing after).
    Crash,
    /// The node's thread stops there for this many milliseconds, as a
    /// stall (a long page fault, a paused VM) would stop it, then goes on.
    Delay {
        /// Milliseconds.
        ms: u64,
    },
}

impl FaultAction {
    /// The action `text` names: empty for a crash, `delay MS` (or `MS`
    /// alone) for a delay.
    pub fn parse(text: &str) -> Result<FaultAction, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let ms = match words.as_slice() {
            [] | ["crash"] => return Ok(FaultAction::Crash),
            ["delay", ms] | [ms] => ms,
            _ => return Err(format!("{text:?} is not an action: crash, or delay MS")),
        };
        match ms.parse::<u64>() {
            Ok(ms) if (1..=600_000).contains(&ms) => Ok(FaultAction::Delay { ms }),
            _ => Err(format!(
                "{ms:?} is not a delay: a whole number of milliseconds, 1 to 600000"
            )),
        }
    }
}

impl std::fmt::Display for FaultAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FaultAction::Crash => write!(f, "crash"),
            FaultAction::Delay { ms } => write!(f, "delay {ms} ms"),
        }
    }
}

impl FaultPoint {
    /// Whether the point is a step of agreeing a failure, of a take-over
    /// or of a schema change, which the president runs (whichever node that is when a failure
    /// comes).
    pub fn runs_at_the_president(self) -> bool {
        matches!(
            self,
            FaultPoint::FailureAfterPrepare
                | FaultPoint::FailureAfterCommit
                | FaultPoint::TakeoverAfterQuery
                | FaultPoint::TakeoverAfterDecision
                | FaultPoint::MasterTakeoverAfterQuery
                | FaultPoint::CreateAfterAddRequests
                | FaultPoint::CreateAfterFirstAnnounce
                | FaultPoint::DropAfterCoordinators
                | FaultPoint::DropAfterFirstDictionary
                | FaultPoint::IndexAfterBuildRequests
                | FaultPoint::IndexAfterFirstAnnounce
                | FaultPoint::IndexDropAfterFirstDictionary
                | FaultPoint::UniqueIndexAfterBuildRequest
        )
    }

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
