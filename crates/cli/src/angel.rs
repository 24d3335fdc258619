//! The angel (NDB's angel process): `tessera node` runs as a small
//! supervising parent that starts the data node as its child and starts
//! it again when it dies without being asked to stop (a crash, kill -9,
//! a fail-fast stop, a shutdown the survival rule ordered): the node then
//! rejoins the running cluster by a node restart
//! (docs/design/0018-node-restart.md).
//!
//! - A node stopped on purpose stays stopped: SIGTERM or SIGINT to the
//!   angel goes on to the node, and the angel exits with the node's code
//!   once it has stopped. A node that exits with code 0 stopped because
//!   it was asked to.
//! - A restart limit: more than `restarts` restarts within `window` and
//!   the angel gives up, saying so, and exits with the node's last code.
//! - Between a death and the next start, a short back-off
//!   ([`BACK_OFF`]): mgmd needs a moment to see the old session close.
//! - A node whose own files cannot be restored (exit code
//!   [`datanode::DAMAGED_FILES_EXIT_CODE`]) is not started again: it
//!   would fail the same way; its log says to use `--initial`.
//! - A restarted node that cannot reach mgmd (exit code
//!   [`datanode::MGMD_UNREACHABLE_EXIT_CODE`]: its host is cut off, or
//!   mgmd is down) is started again after a back-off that grows to
//!   [`UNREACHABLE_BACK_OFF_MAX`], for as long as it takes, uncounted:
//!   a network fault must not leave the node down for good once it heals.
//!   On the first start it is reported like any other failure to start.
//! - A node stopped by mgmd (`node N stop`, exit code
//!   [`datanode::STOPPED_EXIT_CODE`]) is not started again until mgmd
//!   says so (`node N start`): the angel asks mgmd every second
//!   (`angel_wait`) meanwhile.
//! - `--initial` applies to the first start only: a restart after a crash
//!   starts from the node's files (and copies what changed since).
//! - The node dies with the angel (PR_SET_PDEATHSIG), so a killed angel
//!   leaves no orphan holding the node's port and files.
//!
//! The angel and the node stay in the caller's process group, so a
//! terminal's Ctrl-C (or `tessera demo` stopping its group) reaches both.

use std::collections::VecDeque;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// The environment variable that tells a data node its angel started it.
pub const CHILD_ENV: &str = "TESSERA_ANGEL_CHILD";

/// The exit code of a node that never started (a refusal, a bad config,
/// an id in use): the angel does not start it again, since the same
/// refusal would come back.
pub const NOT_STARTED_EXIT_CODE: u8 = 2;

/// Waited between a node's death and its next start.
pub const BACK_OFF: Duration = Duration::from_secs(1);

/// The longest wait between starts of a node that cannot reach mgmd.
pub const UNREACHABLE_BACK_OFF_MAX: Duration = Duration::from_secs(5);

/// How often the angel looks at its node.
const POLL: Duration = Duration::from_millis(100);

/// How long a node asked to stop gets before the angel kills it.
const STOP_GRACE: Duration = Duration::from_secs(30);

/// How the angel restarts its node.
#[derive(Clone, Debug)]
pub struct AngelOptions {
    /// The node's arguments (`node --mgmd ... --node-id N`, without
    /// `--initial`).
    pub node_args: Vec<String>,
    /// Whether the first start deletes the node's files.
    pub initial: bool,
    /// The node's id, for the angel's messages.
    pub node_id: u16,
    /// mgmd's address: a node stopped by mgmd waits there for its start.
    pub mgmd: String,
    /// Restarts allowed within `window`.
    pub restarts: u32,
    /// The window the restarts are counted in.
    pub window: Duration,
}

/// Runs the angel until its node stops for good; returns the exit code
/// to exit with.
pub fn run(options: AngelOptions) -> Result<i32, String> {
    stdx::stop::on_signals();
    let executable =
        std::env::current_exe().map_err(|error| format!("cannot find own executable: {error}"))?;
    let node = options.node_id;
    let mut restarts: VecDeque<Instant> = VecDeque::new();
    let mut initial = options.initial;
    let mut first_start = true;
    // Starts in a row that could not reach mgmd.
    let mut unreachable_in_a_row: u32 = 0;
    loop {
        let mut command = Command::new(&executable);
        command.args(&options.node_args).env(CHILD_ENV, "1");
        if initial {
            command.arg("--initial");
            initial = false;
        }
        let mut child = command
            .spawn()
            .map_err(|error| format!("angel of node {node}: cannot start the node: {error}"))?;
        eprintln!(
            "tessera angel of node {node}: started the node (pid {})",
            child.id()
        );
        let status = watch(&mut child)?;
        let was_first_start = std::mem::replace(&mut first_start, false);
        if stdx::stop::requested() || status.success() {
            eprintln!("tessera angel of node {node}: the node stopped ({status}); stopping too");
            return Ok(status.code().unwrap_or(0));
        }
        match status.code() {
            Some(datanode::RESTART_EXIT_CODE) | Some(datanode::RESTART_INITIAL_EXIT_CODE)
                if !stdx::stop::requested() =>
            {
                // Asked for (mgm's `node N restart`): at once, uncounted.
                initial = status.code() == Some(datanode::RESTART_INITIAL_EXIT_CODE);
                eprintln!(
                    "tessera angel of node {node}: the node stopped for a restart{}; starting \
                     it again",
                    if initial { " with --initial" } else { "" }
                );
                continue;
            }
            Some(datanode::STOPPED_EXIT_CODE) => {
                if wait_for_start(&options) {
                    continue;
                }
                return Ok(0);
            }
            _ => {}
        }
        if status.code() == Some(datanode::MGMD_UNREACHABLE_EXIT_CODE) && !was_first_start {
            unreachable_in_a_row = unreachable_in_a_row.saturating_add(1);
            let wait = (BACK_OFF * unreachable_in_a_row).min(UNREACHABLE_BACK_OFF_MAX);
            if unreachable_in_a_row == 1 || unreachable_in_a_row.is_multiple_of(60) {
                eprintln!(
                    "tessera angel of node {node}: the node cannot reach mgmd at {} ({status}); \
                     starting it again every {} s until it can",
                    options.mgmd,
                    wait.as_secs()
                );
            }
            if !sleep_unless_stopped(wait) {
                return Ok(datanode::MGMD_UNREACHABLE_EXIT_CODE);
            }
            continue;
        }
        unreachable_in_a_row = 0;
        if status.code() == Some(datanode::DAMAGED_FILES_EXIT_CODE) {
            eprintln!(
                "tessera angel of node {node}: the node's own files cannot be restored ({status}; \
                 its log says which and what to do): not starting it again"
            );
            return Ok(datanode::DAMAGED_FILES_EXIT_CODE);
        }
        if status.code() == Some(i32::from(NOT_STARTED_EXIT_CODE))
            || status.code() == Some(datanode::MGMD_UNREACHABLE_EXIT_CODE)
        {
            eprintln!(
                "tessera angel of node {node}: the node did not start ({status}; its log says \
                 why); not starting it again"
            );
            return Ok(status.code().unwrap_or(i32::from(NOT_STARTED_EXIT_CODE)));
        }
        let now = Instant::now();
        while restarts
            .front()
            .is_some_and(|&at| now.duration_since(at) > options.window)
        {
            restarts.pop_front();
        }
        if restarts.len() as u32 >= options.restarts {
            eprintln!(
                "tessera angel of node {node}: the node died ({status}) after {} restarts \
                 within {:?}: giving up (start it again by hand once the cause is fixed)",
                restarts.len(),
                options.window
            );
            return Ok(status.code().unwrap_or(1));
        }
        restarts.push_back(now);
        eprintln!(
            "tessera angel of node {node}: the node died ({status}); starting it again in \
             {BACK_OFF:?} (restart {} of at most {} within {:?})",
            restarts.len(),
            options.restarts,
            options.window
        );
        if !sleep_unless_stopped(BACK_OFF) {
            return Ok(status.code().unwrap_or(1));
        }
    }
}

/// Sleeps `wait`, looking every [`POLL`] whether the angel was asked to
/// stop; false if it was.
fn sleep_unless_stopped(wait: Duration) -> bool {
    let until = Instant::now() + wait;
    while Instant::now() < until {
        if stdx::stop::requested() {
            return false;
        }
        std::thread::sleep(POLL);
    }
    !stdx::stop::requested()
}

/// A node mgmd stopped: asks mgmd every second whether to start it
/// again (`node N start`). False when the angel itself is asked to stop.
fn wait_for_start(options: &AngelOptions) -> bool {
    let node = options.node_id;
    eprintln!(
        "tessera angel of node {node}: the node was stopped by mgm (node {node} stop); waiting \
         for `node {node} start`"
    );
    let mut unreachable_said = false;
    loop {
        if stdx::stop::requested() {
            eprintln!("tessera angel of node {node}: asked to stop while the node was stopped");
            return false;
        }
        match mgmd::client::MgmClient::connect(&options.mgmd)
            .and_then(|mut mgm| mgm.angel_wait(node))
        {
            Ok(true) => {
                eprintln!("tessera angel of node {node}: mgmd says start: starting the node");
                return true;
            }
            Ok(false) => unreachable_said = false,
            Err(error) if !unreachable_said => {
                eprintln!(
                    "tessera angel of node {node}: cannot ask mgmd at {}: {error}; asking again",
                    options.mgmd
                );
                unreachable_said = true;
            }
            Err(_) => {}
        }
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until && !stdx::stop::requested() {
            std::thread::sleep(POLL);
        }
    }
}

/// Waits for `child` to exit, passing a stop request on to it (and
/// killing it if it has not stopped within [`STOP_GRACE`]).
fn watch(child: &mut Child) -> Result<ExitStatus, String> {
    let mut stop_sent: Option<Instant> = None;
    loop {
        if let Some(status) = child
            .try_wait()
            .map_err(|error| format!("cannot wait for the node: {error}"))?
        {
            return Ok(status);
        }
        if stdx::stop::requested() {
            match stop_sent {
                None => {
                    let pid = child.id() as libc::pid_t;
                    // SAFETY: kill has no memory-safety preconditions.
                    unsafe {
                        libc::kill(pid, libc::SIGTERM);
                    }
                    stop_sent = Some(Instant::now());
                }
                Some(at) if at.elapsed() > STOP_GRACE => {
                    let _ = child.kill();
                }
                Some(_) => {}
            }
        }
        std::thread::sleep(POLL);
    }
}

/// In a node its angel started: the node dies with the angel, so a
/// killed angel leaves no orphan behind.
pub fn die_with_angel() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    // SAFETY: prctl(PR_SET_PDEATHSIG) has no memory-safety preconditions.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
    }
    // The angel may have died before the call: then no signal comes.
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } == 1 {
        std::process::exit(1);
    }
}
