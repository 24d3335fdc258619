//! The signal table's group Global checkpoints: 160..=199: declarations in
//! `signal_table!`'s form (the signals module says what each part means),
//! handed on with the groups before them to the next group's macro, and
//! by the last to `signal_table!` itself. One file a group keeps the table
//! readable; the numbers and the order are the table's.

macro_rules! checkpoints_signals {
    ($($declared:tt)*) => {
        schema_signals! {
            $($declared)*

            /// dih -> tc. Phase one of the GCI switch: stop taking commit decisions.
            #[derive(Debug, PartialEq)]
            160 GcpPrepare: Dih -> Tc, node {
                /// The GCI that commits will get after the switch.
                new_gci: Gci,
            }

            /// tc -> dih. No commit decision will be taken until GCP_COMMIT.
            #[derive(Debug, PartialEq)]
            161 GcpPrepareConf: Tc -> Dih, node {
                /// Echoed.
                new_gci: Gci,
            }

            /// dih -> tc. Phase two: commits from now on get `gci`; release held commits.
            #[derive(Debug, PartialEq)]
            162 GcpCommit: Dih -> Tc, node {
                /// The new current GCI.
                gci: Gci,
            }

            /// tc -> dih. Switched.
            #[derive(Debug, PartialEq)]
            163 GcpCommitConf: Tc -> Dih, node {
                /// Echoed.
                gci: Gci,
            }

            /// master dih -> the other dihs. Every tc has switched to `gci`.
            #[derive(Debug, PartialEq)]
            164 GcpCompleteRep: Dih -> Dih, node {
                /// The GCI now current on every tc.
                gci: Gci,
            }

            /// master dih -> every tc of every node. Answer with [`GcpFlushConf`] once
            /// every transaction this tc committed with a GCI up to `gci` has finished
            /// its commit phase (COMMITTED on every replica, so each replica's ldm has
            /// logged it). Sent after every tc has switched past `gci`.
            #[derive(Debug, PartialEq)]
            165 GcpFlushReq: Dih -> Tc, node {
                /// The last GCI of the global checkpoint being made durable.
                gci: Gci,
            }

            /// tc -> master dih. Every commit with a GCI up to `gci` is logged.
            #[derive(Debug, PartialEq)]
            166 GcpFlushConf: Tc -> Dih, node {
                /// Echoed.
                gci: Gci,
            }

            /// master dih -> every ldm of every node. Append the "`gci` complete"
            /// marker to every redo part, write and fsync them; then answer
            /// [`GcpSaveConf`]. An fsync failure stops the node (docs/design/durability.md §6).
            #[derive(Debug, PartialEq)]
            167 GcpSaveReq: Dih -> Ldm, node {
                /// The GCI made complete.
                gci: Gci,
            }

            /// ldm -> master dih. Every redo part of this ldm holds the marker, durably.
            #[derive(Debug, PartialEq)]
            168 GcpSaveConf: Ldm -> Dih, node {
                /// Echoed.
                gci: Gci,
            }

            /// master dih -> every dih (itself included). Record `complete_gci` as
            /// complete in this node's system file (both copies, fsynced), then answer
            /// [`CopyGciConf`].
            #[derive(Debug, PartialEq)]
            169 CopyGciReq: Dih -> Dih, node {
                /// The latest complete GCI.
                complete_gci: Gci,
                /// The master's current GCI: recorded as the highest started, so that
                /// after a restart new GCIs start above every GCI ever handed out.
                started_gci: Gci,
            }

            /// dih -> master dih. The system file records the GCI.
            #[derive(Debug, PartialEq)]
            170 CopyGciConf: Dih -> Dih, node {
                /// Echoed.
                complete_gci: Gci,
            }

            /// master dih -> every tc of every node. `gci` is complete: answer the
            /// GCI waits up to it.
            #[derive(Debug, PartialEq)]
            171 GcpDurableRep: Dih -> Tc, node {
                /// The latest complete GCI.
                gci: Gci,
            }

            /// new master dih -> every live tc and every live dih, once every
            /// survivor handled the failure of the old master (master take-over,
            /// docs/design/failures.md §8): where does the GCI switch stand here?
            /// A tc answers MASTER_GCP_TC_CONF and forgets a flush the old master
            /// asked for; a dih answers MASTER_GCP_DIH_CONF.
            #[derive(Debug, PartialEq)]
            172 MasterGcpReq: Dih -> Tc | Dih, node {
                /// The membership the take-over runs for (echoed).
                membership_id: u32,
            }

            /// tc -> the new master dih.
            #[derive(Debug, PartialEq)]
            173 MasterGcpTcConf: Tc -> Dih, node {
                /// Echoed.
                membership_id: u32,
                /// The GCI this tc's commits get (the last GCP_COMMIT it had).
                current_gci: Gci,
                /// It holds commit decisions (a GCP_PREPARE had no GCP_COMMIT).
                prepared: bool,
            }

            /// dih -> the new master dih.
            #[derive(Debug, PartialEq)]
            174 MasterGcpDihConf: Dih -> Dih, node {
                /// Echoed.
                membership_id: u32,
                /// The latest GCI the old master reported every tc switched to.
                latest: Gci,
                /// The latest GCI this dih recorded complete.
                complete: Gci,
                /// The highest GCI this dih recorded as started.
                started: Gci,
            }
        }
    };
}
