//! The `sr-topology` binary: JSON line, control commands, clean stop, bad arguments.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sr-topology");

fn pid_alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 }
}

#[test]
fn up_json_then_down() {
    let mut child = Command::new(BIN)
        .args([
            "up",
            "--json",
            "--replicas",
            "1",
            "--sentinels",
            "1",
            "--quorum",
            "1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).expect("one JSON line");
    let pport = v["primary"]["port"].as_u64().unwrap();
    let spport = v["sentinels"][0]["port"].as_u64().unwrap();
    assert_eq!(v["service"], "mymaster");
    assert_eq!(
        v["url"],
        format!("redis+sentinel://127.0.0.1:{spport}/mymaster")
    );
    let dir = std::path::PathBuf::from(v["dir"].as_str().unwrap());
    assert!(dir.is_dir());
    let pids: Vec<u32> = [&v["primary"], &v["replicas"][0], &v["sentinels"][0]]
        .iter()
        .map(|n| n["pid"].as_u64().unwrap() as u32)
        .collect();
    assert!(pids.iter().all(|&p| pid_alive(p)));

    writeln!(stdin, "primary").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let r: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(r["port"].as_u64(), Some(pport));
    writeln!(stdin, "bogus").unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert!(line.contains("\"ok\":false"), "{line}");

    writeln!(stdin, "down").unwrap();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert!(pids.iter().all(|&p| !pid_alive(p)), "pids survived");
    assert!(!dir.exists());
}

#[test]
fn sigterm_stops_everything() {
    let mut child = Command::new(BIN)
        .args([
            "up",
            "--json",
            "--replicas",
            "0",
            "--sentinels",
            "1",
            "--quorum",
            "1",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let pid = v["primary"]["pid"].as_u64().unwrap() as u32;
    // SAFETY: our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(!pid_alive(pid));
}

#[test]
fn bad_arguments_exit_2_naming_the_argument() {
    for (args, needle) in [
        (vec!["up", "--replicas", "two"], "--replicas"),
        (vec!["up", "--server", "memcached"], "--server"),
        (vec!["up", "--frobnicate"], "--frobnicate"),
        (vec!["sideways"], "sideways"),
    ] {
        let o = Command::new(BIN).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    let o = Command::new(BIN).arg("--help").output().unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("sr-topology up"));
}

/// `up --net`: hosts in namespaces, partition/heal and spawn over stdin, every namespace gone
/// after `down`. Needs root: skips with a message otherwise.
#[test]
fn up_net_partitions_spawns_and_cleans_up() {
    if let Err(why) = sentinel_recovery_testkit::net::netns_available() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let mut child = Command::new(BIN)
        .args(["up", "--json", "--net", "--clients", "1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let up: serde_json::Value = serde_json::from_str(&first).expect("one JSON line");
    assert!(up["hosts"]["client-1"]["ip"].is_string(), "{up}");
    let mut ask = |cmd: &str| -> serde_json::Value {
        writeln!(stdin, "{cmd}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{cmd}: {line:?}: {e}"))
    };
    let v = ask("hosts");
    assert_eq!(v["ok"], true, "{v}");
    let hosts = v["hosts"].as_object().unwrap();
    assert_eq!(hosts.len(), 7, "6 nodes + 1 client: {v}");
    let client_ns = hosts["client-1"]["netns"].as_str().unwrap().to_string();
    let primary_ip = hosts["primary"]["ip"].as_str().unwrap().to_string();
    let prefix = client_ns.trim_end_matches("client-1").to_string();
    let p = ask("primary");
    assert_eq!(p["host"], primary_ip.as_str(), "{p}");
    let port = p["port"].as_u64().unwrap() as u16;
    let reach = || {
        let addr = format!("{primary_ip}:{port}").parse().unwrap();
        sentinel_recovery_testkit::net::dial(
            Some(&client_ns),
            addr,
            std::time::Duration::from_millis(600),
        )
        .is_ok()
    };
    assert!(reach());
    assert_eq!(ask("partition primary client-1")["ok"], true);
    assert!(!reach(), "client-1 still reaches the primary");
    assert_eq!(ask("heal")["ok"], true);
    assert!(reach());
    let bad = ask("partition primary,nobody client-1");
    assert_eq!(bad["ok"], false, "{bad}");
    let s = ask("spawn client-1 sleep 60");
    let pid = s["pid"].as_u64().unwrap() as u32;
    assert!(pid_alive(pid));
    let f = ask("link-faults 50 20");
    assert_eq!(f["ok"], false, "no --link-proxies: {f}");

    writeln!(stdin, "down").unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!pid_alive(pid), "spawned client left running");
    assert_eq!(
        sentinel_recovery_testkit::net::namespaces_named(&prefix),
        Vec::<String>::new()
    );
}
