//! `sentinel-recovery proxy` as a sidecar process, with clients nobody here wrote (redis-cli,
//! redis-benchmark) and plain sockets: the `listening` line, events, metrics, a failover, a
//! clean exit at SIGTERM; 10,000 idle sessions and a client pipelining a million commands
//! without reading, with the sidecar's own memory measured from /proc.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sentinel_recovery_testkit::{wait_until, Topology, TopologySpec};

const IO: Duration = Duration::from_secs(20);

/// The sidecar, stopped by its pid when dropped (also when a test fails).
struct Sidecar {
    child: Child,
    lines: BufReader<ChildStdout>,
    port: u16,
    metrics: String,
}

impl Sidecar {
    fn start(url: &str, extra: &[&str]) -> Sidecar {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sentinel-recovery"))
            .args([
                "proxy",
                url,
                "--listen",
                "127.0.0.1:0",
                "--json",
                "--metrics",
                "127.0.0.1:0",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        lines.read_line(&mut first).unwrap();
        let listening: serde_json::Value =
            serde_json::from_str(&first).unwrap_or_else(|e| panic!("first line {first:?}: {e}"));
        assert_eq!(listening["kind"], "listening", "{first}");
        let address = listening["address"].as_str().unwrap();
        let port = address.rsplit(':').next().unwrap().parse().unwrap();
        let metrics = listening["metrics"].as_str().unwrap().to_string();
        Sidecar {
            child,
            lines,
            port,
            metrics,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Reads event lines until one of `kind` (the topology snapshot comes first).
    fn wait_event(&mut self, kind: &str) -> serde_json::Value {
        loop {
            let mut line = String::new();
            assert!(
                self.lines.read_line(&mut line).unwrap() > 0,
                "sidecar output ended"
            );
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["kind"] == kind {
                return v;
            }
        }
    }

    /// One counter or gauge from `--metrics`.
    fn metric(&self, name: &str) -> f64 {
        let mut s = TcpStream::connect(&self.metrics).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        assert!(body.starts_with("HTTP/1.1 200 OK"), "{body}");
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("{name} not in {body}"))
            .trim()
            .parse()
            .unwrap()
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        // SAFETY: signals the child this test started, by its own pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let status = self.child.wait().unwrap();
        std::mem::forget(self);
        status
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli (Debian's redis-tools) is installed by scripts/deps.sh");
    assert!(out.status.success(), "redis-cli {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn redis_cli_and_redis_benchmark_work_unchanged_through_a_failover_and_sigterm_exits_0() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let mut sidecar = Sidecar::start(&topo.url(), &[]);
    sidecar.wait_event("topology");
    assert_eq!(redis_cli(sidecar.port, &["SET", "k", "before"]), "OK");
    assert_eq!(redis_cli(sidecar.port, &["GET", "k"]), "before");
    let bench = Command::new("redis-benchmark")
        .args([
            "-p",
            &sidecar.port.to_string(),
            "-q",
            "-n",
            "20000",
            "-c",
            "10",
            "-P",
            "16",
            "-t",
            "set,get",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&bench.stdout);
    assert!(bench.status.success(), "{bench:?}");
    for test in ["SET", "GET"] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{test}:"))
                    && l.contains("requests per second")),
            "redis-benchmark {test}: {text}"
        );
    }
    assert!(sidecar.metric("sentinel_recovery_proxy_commands_forwarded_total") >= 40_000.0);

    let old = topo.primary().port();
    topo.sentinel_failover().unwrap();
    sidecar.wait_event("failover_started");
    let changed = sidecar.wait_event("primary_changed");
    let new = changed["new"]["port"].as_u64().unwrap() as u16;
    assert_ne!(new, old);
    assert_eq!(redis_cli(sidecar.port, &["SET", "k", "after"]), "OK");
    let on_new = topo.node_by_port(new).unwrap().cmd(&["GET", "k"]).unwrap();
    assert_eq!(on_new.as_str().as_deref(), Some("after"));
    assert!(sidecar.metric("sentinel_recovery_proxy_primary_changes_total") >= 1.0);
    let status = sidecar.terminate();
    assert!(status.success(), "SIGTERM: {status:?}");
}

#[test]
fn ten_thousand_idle_sessions_stay_small_and_a_client_that_never_reads_is_paused() {
    let topo = Topology::start(TopologySpec::default()).unwrap();
    let sidecar = Sidecar::start(&topo.url(), &["--max-clients", "20000"]);
    let addr = format!("127.0.0.1:{}", sidecar.port);
    assert_eq!(redis_cli(sidecar.port, &["PING"]), "PONG");
    let before = sidecar.rss_kib();
    let idle: Vec<TcpStream> = (0..10_000)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    wait_until(IO, "10,000 sessions open", || {
        (sidecar.metric("sentinel_recovery_proxy_sessions") >= 10_001.0 - 1.0).then_some(())
    })
    .unwrap();
    let per_session = (sidecar.rss_kib().saturating_sub(before)) as f64 / 10_000.0;
    println!("sidecar memory per idle session: {per_session:.1} KiB (RSS {before} KiB before)");
    assert!(per_session < 64.0, "{per_session} KiB per idle session");
    // Idle sessions open no upstream: the primary sees none of them.
    let clients = topo
        .primary()
        .cmd(&["INFO", "clients"])
        .unwrap()
        .as_str()
        .unwrap();
    let connected: u64 = clients
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(connected < 100, "{connected} connections on the primary");
    assert_eq!(redis_cli(sidecar.port, &["PING"]), "PONG");
    drop(idle);

    // A million INCRs written without reading a reply: the sidecar stops reading the client
    // once its bounded buffers are full, so its memory stays flat; then every reply arrives.
    const N: u64 = 1_000_000;
    let mut writer_conn = TcpStream::connect(&addr).unwrap();
    let reader_conn = writer_conn.try_clone().unwrap();
    let written = Arc::new(AtomicU64::new(0));
    let progress = written.clone();
    let writer = std::thread::spawn(move || {
        let one = b"*2\r\n$4\r\nINCR\r\n$9\r\npipelined\r\n";
        let chunk: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
        for _ in 0..N / 1000 {
            writer_conn.write_all(&chunk).unwrap();
            progress.fetch_add(1000, Ordering::Relaxed);
        }
    });
    let start_rss = sidecar.rss_kib();
    // Paused: no progress over several looks, well short of the end.
    let mut last = (u64::MAX, 0);
    let stalled_at = wait_until(IO, "the writer paused by the sidecar", || {
        let now = written.load(Ordering::Relaxed);
        last = if now == last.0 {
            (now, last.1 + 1)
        } else {
            (now, 0)
        };
        (last.1 >= 8).then_some(now)
    })
    .unwrap();
    assert!(
        stalled_at < N,
        "all {N} commands went through without a reply read"
    );
    let paused_rss = sidecar.rss_kib();
    println!("paused after {stalled_at} commands; sidecar RSS {start_rss} -> {paused_rss} KiB");
    assert!(
        paused_rss < start_rss + 64 * 1024,
        "memory grew while the client did not read"
    );
    let mut reader = BufReader::new(reader_conn);
    let mut line = String::new();
    for i in 1..=N {
        line.clear();
        reader.read_line(&mut line).unwrap();
        assert_eq!(line, format!(":{i}\r\n"), "reply {i}");
    }
    writer.join().unwrap();
    assert!(sidecar.rss_kib() < start_rss + 64 * 1024);
}
