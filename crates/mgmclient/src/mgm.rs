//! The management client's commands (NDB's ndb_mgm): turns a typed command
//! such as `show`, `all report threads` or `all report checkpoints` into a
//! request and formats the answer as ndb_mgm-like text or as JSON for
//! scripts.

use serde_json::Value;

use crate::client::MgmClient;
use crate::MgmdError;

/// Shown for each node in text output; nodes all run this same build.
const VERSION: &str = concat!("tessera-", env!("CARGO_PKG_VERSION"));

/// Runs one command against mgmd at `addr`. Commands are case-insensitive
/// and extra spaces are ignored. With `json`, the output is the response
/// object without its `ok` field, compact on one line; otherwise text. The
/// result has no trailing newline.
pub fn run_command(addr: &str, command: &str, json: bool) -> Result<String, MgmdError> {
    run_command_waiting(addr, command, json, false)
}

/// How long `--wait` waits for a restarted node to be started again.
const RESTART_WAIT: std::time::Duration = std::time::Duration::from_secs(600);

/// As [`run_command`]; `wait`: a `node N restart` or `node N start`
/// returns only once the node is started again, a `node N stop` once it
/// is stopped (`all restart`, a rolling restart, always waits for each
/// node before the next).
pub fn run_command_waiting(
    addr: &str,
    command: &str,
    json: bool,
    wait: bool,
) -> Result<String, MgmdError> {
    run_command_watching(addr, command, json, wait, &mut |_, _| {})
}

/// As [`run_command_waiting`], calling `watch` with the node's id and its
/// entry of `show` each time a wait looks (a few times a second): how a
/// terminal shows a restart's progress.
pub fn run_command_watching(
    addr: &str,
    command: &str,
    json: bool,
    wait: bool,
    watch: &mut dyn FnMut(u16, &Value),
) -> Result<String, MgmdError> {
    let words: Vec<String> = command.split_whitespace().map(str::to_lowercase).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let (response, format): (_, fn(&Value) -> String) = match words.as_slice() {
        ["show"] => (MgmClient::connect(addr)?.show()?, format_show),
        ["all", "report", "threads"] => {
            (MgmClient::connect(addr)?.report_threads()?, format_threads)
        }
        ["all", "report", "checkpoints"] => (
            MgmClient::connect(addr)?.report_checkpoints()?,
            format_checkpoints,
        ),
        ["node", id, "fault", point, action @ ..] => {
            let unknown = || MgmdError::UnknownCommand(command.trim().to_owned());
            let id: u16 = id.parse().map_err(|_| unknown())?;
            let point = point.to_uppercase();
            let delay_ms = match signal::faults::FaultAction::parse(&action.join(" ")) {
                Ok(signal::faults::FaultAction::Crash) => None,
                Ok(signal::faults::FaultAction::Delay { ms }) => Some(ms),
                Err(_) => return Err(unknown()),
            };
            let response = MgmClient::connect(addr)?.arm_fault(id, &point, delay_ms)?;
            (response, |_: &Value| "fault point armed".to_string())
        }
        ["node", id, action @ ("restart" | "stop" | "start"), flags @ ..]
            if flags.is_empty() || (*action == "restart" && flags == ["--initial"]) =>
        {
            let id: u16 = id
                .parse()
                .map_err(|_| MgmdError::UnknownCommand(command.trim().to_owned()))?;
            let mut mgm = MgmClient::connect(addr)?;
            let (mut response, format): (Value, fn(&Value) -> String) = match *action {
                "restart" => (mgm.restart_node(id, !flags.is_empty())?, |response| {
                    format_node_action(response, "restarted")
                }),
                "stop" => (mgm.stop_node(id)?, |response| {
                    format_node_action(response, "stopped")
                }),
                _ => (mgm.start_node(id)?, |response| {
                    format_node_action(response, "started")
                }),
            };
            if wait && *action == "stop" {
                wait_until(addr, id, "stopped", watch, |node| {
                    node["state"] == "stopped"
                })?;
            } else if wait {
                wait_restarted(addr, id, &response, watch)?;
            }
            response["node_id"] = id.into();
            response["waited"] = wait.into();
            (response, format)
        }
        ["all", "restart"] => {
            // Rolling: one node at a time, each started again before the
            // next goes down, so every node group keeps a node serving.
            let show = MgmClient::connect(addr)?.show()?;
            let ids: Vec<u16> = show["nodes"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|node| node["type"] == "data")
                .filter_map(|node| node["id"].as_u64().and_then(|id| u16::try_from(id).ok()))
                .collect();
            for &id in &ids {
                let response = MgmClient::connect(addr)?.restart_node(id, false)?;
                wait_restarted(addr, id, &response, watch)?;
            }
            (serde_json::json!({ "restarted": ids }), format_rolling)
        }
        _ => return Err(MgmdError::UnknownCommand(command.trim().to_owned())),
    };
    if json {
        Ok(response.to_string())
    } else {
        Ok(format(&response))
    }
}

fn field<'a>(node: &'a Value, name: &str) -> &'a Value {
    node.get(name).unwrap_or(&Value::Null)
}

/// A JSON value as text: strings bare (quoted if they contain spaces).
fn plain(value: &Value) -> String {
    match value {
        Value::String(s) if !s.is_empty() && !s.contains(char::is_whitespace) => s.clone(),
        other => other.to_string(),
    }
}

/// Waits until data node `id` is started with a start count above the
/// one `response` (mgmd's answer to the restart or start) gives.
fn wait_restarted(
    addr: &str,
    id: u16,
    response: &Value,
    watch: &mut dyn FnMut(u16, &Value),
) -> Result<(), MgmdError> {
    let before = response["start_count"].as_u64().unwrap_or(0);
    wait_until(addr, id, "started again", watch, |node| {
        node["state"] == "started" && node["start_count"].as_u64().unwrap_or(0) > before
    })
}

/// Waits until data node `id`'s entry of `show` passes `done` (within
/// [`RESTART_WAIT`]), showing each look to `watch`.
fn wait_until(
    addr: &str,
    id: u16,
    what: &str,
    watch: &mut dyn FnMut(u16, &Value),
    done: impl Fn(&Value) -> bool,
) -> Result<(), MgmdError> {
    let deadline = std::time::Instant::now() + RESTART_WAIT;
    loop {
        let show = MgmClient::connect(addr)?.show()?;
        let node = show["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|node| node["type"] == "data" && node["id"] == id);
        if let Some(node) = node {
            watch(id, node);
            if done(node) {
                return Ok(());
            }
        }
        if std::time::Instant::now() >= deadline {
            return Err(MgmdError::Protocol(format!(
                "data node {id} was not {what} within {RESTART_WAIT:?}"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `Node N: restarted` once done (`--wait`), `Node N: is being
/// restarted` before.
fn format_node_action(response: &Value, done: &str) -> String {
    let id = plain(&response["node_id"]);
    if response["waited"] == true {
        format!("Node {id}: {done}")
    } else {
        format!("Node {id}: is being {done}")
    }
}

fn format_rolling(response: &Value) -> String {
    let ids: Vec<String> = response["restarted"]
        .as_array()
        .into_iter()
        .flatten()
        .map(plain)
        .collect();
    format!("Restarted nodes {} one at a time", ids.join(", "))
}

/// `show` as ndb_mgm prints it.
pub fn format_show(response: &Value) -> String {
    let nodes: &[Value] = field(response, "nodes")
        .as_array()
        .map_or(&[], Vec::as_slice);
    let of_type = |t: &str| -> Vec<&Value> {
        nodes
            .iter()
            .filter(|n| field(n, "type").as_str() == Some(t))
            .collect()
    };
    let mut out = String::from("Cluster Configuration\n---------------------\n");
    let sections: [(&str, &str); 3] = [
        ("data", "ndbd(NDB)"),
        ("mgmd", "ndb_mgmd(MGM)"),
        ("api", "api(API)"),
    ];
    for (index, (kind, title)) in sections.into_iter().enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let group = of_type(kind);
        out.push_str(&format!("[{title}]\t{} node(s)\n", group.len()));
        for node in group {
            let id = plain(field(node, "id"));
            let host = plain(field(node, "host"));
            let line = match kind {
                "data" => {
                    let state = field(node, "state").as_str().unwrap_or("unknown");
                    if state == "not_connected" {
                        format!("id={id}\t(not connected, accepting connect from {host})")
                    } else if state == "failed" {
                        format!("id={id}\t(failed, accepting connect from {host})")
                    } else if state == "stopped" {
                        format!("id={id}\t(stopped by mgm: `node {id} start` starts it again)")
                    } else if state == "shut_down" {
                        let reason = field(node, "shutdown_reason").as_str().unwrap_or("?");
                        format!("id={id}\t(shut down: {reason})")
                    } else {
                        let pid = field(node, "pid")
                            .as_u64()
                            .map_or_else(|| "?".to_owned(), |p| p.to_string());
                        let group = plain(field(node, "group"));
                        // A node restart shows its phase and copy so far.
                        let restart = match field(node, "start_phase").as_str() {
                            Some(phase) => {
                                let progress = field(node, "copy_progress");
                                let copy = match progress["rows"].as_u64() {
                                    Some(rows) => format!(
                                        ", {}/{} partitions, {rows} rows copied at {} rows/s, \
                                         about {} s left",
                                        plain(&progress["partitions_copied"]),
                                        plain(&progress["partitions"]),
                                        plain(&progress["rows_per_second"]),
                                        plain(&progress["estimated_seconds_left"]),
                                    ),
                                    None => String::new(),
                                };
                                format!(", node restart: {phase}{copy}")
                            }
                            None => String::new(),
                        };
                        format!(
                            "id={id}\t@{host}  ({VERSION}, Nodegroup: {group}, {state}, pid \
                             {pid}{restart})"
                        )
                    }
                }
                "mgmd" => format!("id={id}\t@{host}  ({VERSION})"),
                _ => format!(
                    "id={id}\t{}",
                    field(node, "state").as_str().unwrap_or("connected")
                ),
            };
            out.push_str(&line);
            out.push('\n');
        }
    }
    out.truncate(out.trim_end().len());
    out
}

/// What a report says when no data node answered.
const NO_DATA_NODES: &str = "no data nodes connected";

/// The `nodes` of a report answer; `None` when there are none.
fn reported_nodes(response: &Value) -> Option<&[Value]> {
    field(response, "nodes")
        .as_array()
        .map(Vec::as_slice)
        .filter(|nodes| !nodes.is_empty())
}

/// `all report threads`: one line per thread, node id then its fields.
pub fn format_threads(response: &Value) -> String {
    let Some(nodes) = reported_nodes(response) else {
        return NO_DATA_NODES.to_owned();
    };
    let mut lines = Vec::new();
    for node in nodes {
        let id = plain(field(node, "id"));
        let threads: &[Value] = field(node, "threads").as_array().map_or(&[], Vec::as_slice);
        if threads.is_empty() {
            lines.push(format!("id={id}\t(no threads reported)"));
        }
        for thread in threads {
            let fields = match thread {
                Value::Object(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={}", plain(v)))
                    .collect::<Vec<_>>()
                    .join(" "),
                other => other.to_string(),
            };
            lines.push(format!("id={id}\t{fields}"));
        }
    }
    lines.join("\n")
}

/// The counters of a node's `checkpoints`, printed as they are named.
const CHECKPOINT_COUNTERS: [&str; 5] = [
    "lcp_count",
    "lcp_bytes_written",
    "changed_row_bytes",
    "checkpoint_disk_bytes",
    "live_data_bytes",
];

/// `all report checkpoints`: one line per data node, its id then its
/// counters and pacing. The reason comes last and bare ("keep up"), so
/// the line reads as the sentence it is; scripts use `--json`.
pub fn format_checkpoints(response: &Value) -> String {
    let Some(nodes) = reported_nodes(response) else {
        return NO_DATA_NODES.to_owned();
    };
    let mut lines = Vec::new();
    for node in nodes {
        let id = plain(field(node, "id"));
        if node.get("lcp_count").is_none() {
            lines.push(format!("id={id}\t(no checkpoints reported)"));
            continue;
        }
        let mut fields: Vec<String> = CHECKPOINT_COUNTERS
            .iter()
            .map(|name| format!("{name}={}", plain(field(node, name))))
            .collect();
        let pacing = field(node, "pacing");
        let pacing_field = |name: &str| plain(field(pacing, name));
        fields.push(format!(
            "speed={}B/s",
            pacing_field("speed_bytes_per_second")
        ));
        fields.push(format!(
            "keep_up={}B/s",
            pacing_field("keep_up_bytes_per_second")
        ));
        fields.push(format!(
            "change={}B/s",
            pacing_field("change_bytes_per_second")
        ));
        fields.push(format!("redo_fill={}%", pacing_field("redo_fill_percent")));
        fields.push(format!("busy={}%", pacing_field("busy_percent")));
        let reason = match field(pacing, "reason") {
            Value::String(reason) => reason.clone(),
            other => other.to_string(),
        };
        fields.push(format!("reason={reason}"));
        lines.push(format!("id={id}\t{}", fields.join(" ")));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn show_text_looks_like_ndb_mgm() {
        let response = json!({"nodes": [
            {"id": 2, "type": "data", "host": "127.0.0.1", "group": 0, "state": "started", "pid": 1234, "start_count": 1},
            {"id": 3, "type": "data", "host": "127.0.0.1", "group": 0, "state": "not_connected", "pid": null, "start_count": 0},
            {"id": 1, "type": "mgmd", "host": "127.0.0.1", "state": "started", "pid": 99},
            {"id": 128, "type": "api", "host": "127.0.0.1", "state": "connected"}
        ], "latest_gci": 7});
        let expected = format!(
            "Cluster Configuration\n---------------------\n[ndbd(NDB)]\t2 node(s)\n\
             id=2\t@127.0.0.1  ({VERSION}, Nodegroup: 0, started, pid 1234)\n\
             id=3\t(not connected, accepting connect from 127.0.0.1)\n\n\
             [ndb_mgmd(MGM)]\t1 node(s)\nid=1\t@127.0.0.1  ({VERSION})\n\n\
             [api(API)]\t1 node(s)\nid=128\tconnected"
        );
        assert_eq!(format_show(&response), expected);
    }

    #[test]
    fn show_text_tells_a_failed_or_shut_down_node_from_one_never_started() {
        let response = json!({"nodes": [
            {"id": 2, "type": "data", "host": "127.0.0.1", "group": 0, "state": "failed", "pid": null},
            {"id": 3, "type": "data", "host": "127.0.0.1", "group": 0, "state": "shut_down", "pid": null,
             "shutdown_reason": "president 2 declared this node failed"},
        ]});
        let text = format_show(&response);
        assert!(
            text.contains("id=2\t(failed, accepting connect from 127.0.0.1)")
                && text.contains("id=3\t(shut down: president 2 declared this node failed)"),
            "{text}"
        );
    }

    #[test]
    fn show_text_survives_odd_responses() {
        let text = format_show(&json!({"nodes": [{"type": "data"}, 5, {"id": "x"}]}));
        assert!(text.contains("[ndbd(NDB)]\t1 node(s)"), "{text}");
        assert!(format_show(&json!(null)).contains("[api(API)]\t0 node(s)"));
    }

    #[test]
    fn threads_text_has_a_line_per_thread() {
        let response = json!({"nodes": [
            {"id": 2, "threads": [{"name": "ldm0", "busy_pct": 3}, {"name": "main thread", "busy_pct": 0}]},
            {"id": 3, "threads": []}
        ]});
        assert_eq!(
            format_threads(&response),
            "id=2\tbusy_pct=3 name=ldm0\nid=2\tbusy_pct=0 name=\"main thread\"\nid=3\t(no threads reported)"
        );
        assert_eq!(
            format_threads(&json!({"nodes": []})),
            "no data nodes connected"
        );
    }

    #[test]
    fn checkpoints_text_has_a_line_per_node() {
        let response = json!({"nodes": [
            {"id": 2, "lcp_count": 12, "lcp_bytes_written": 4096, "changed_row_bytes": 1000,
             "checkpoint_disk_bytes": 8192, "live_data_bytes": 2048,
             "pacing": {"speed_bytes_per_second": 300, "keep_up_bytes_per_second": 200,
                        "change_bytes_per_second": 100, "redo_fill_percent": 3,
                        "busy_percent": 40, "reason": "keep up", "ldms": []}},
            {"id": 3}
        ]});
        assert_eq!(
            format_checkpoints(&response),
            "id=2\tlcp_count=12 lcp_bytes_written=4096 changed_row_bytes=1000 \
             checkpoint_disk_bytes=8192 live_data_bytes=2048 speed=300B/s keep_up=200B/s \
             change=100B/s redo_fill=3% busy=40% reason=keep up\n\
             id=3\t(no checkpoints reported)"
        );
        assert_eq!(
            format_checkpoints(&json!({"nodes": []})),
            "no data nodes connected"
        );
        // Odd answers print what there is rather than fail.
        let odd = format_checkpoints(&json!({"nodes": [{"id": 4, "lcp_count": 1}, 7]}));
        assert!(
            odd.starts_with("id=4\tlcp_count=1 lcp_bytes_written=null"),
            "{odd}"
        );
        assert!(
            odd.ends_with("reason=null\nid=null\t(no checkpoints reported)"),
            "{odd}"
        );
    }

    #[test]
    fn unknown_command_lists_the_known_ones() {
        // No connection is made for an unknown command.
        let e = run_command("127.0.0.1:1", "  sho w ", false).expect_err("unknown");
        let text = e.to_string();
        assert!(
            text.contains("\"sho w\"")
                && text.contains("show, all report threads, all report checkpoints"),
            "{text}"
        );
        assert_eq!(
            crate::KNOWN_COMMANDS,
            [
                "show",
                "all report threads",
                "all report checkpoints",
                "node <id> fault <point> [delay <ms>]",
                "node <id> restart [--initial]",
                "node <id> stop",
                "node <id> start",
                "all restart"
            ]
        );
    }
}
