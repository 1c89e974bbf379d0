//! `sr-soak run`: starts the cluster, the recorders and the writers, runs the seeded fault
//! schedule for the asked number of minutes, stops everything, reads the final data and hands the
//! directory to the checker.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sentinel_recovery_testkit::{wait_until, TopologySpec};
use serde_json::{json, Value};

use crate::cluster::{Cluster, POLL};
use crate::faults::Fault;
use crate::jsonl::{now_ms, Sink};
use crate::procs::{Writer, WriterSpec};
use crate::record::{Recorders, SentinelAt};
use crate::rng::Rng;

/// Every call's deadline (the writers' `command_timeout_ms`).
pub const COMMAND_TIMEOUT_MS: u64 = 2000;
/// Sentinels' `down-after-milliseconds`.
pub const DOWN_AFTER_MS: u64 = 1000;
/// How long the topology gets to become healthy again after a fault.
const HEAL_TIMEOUT: Duration = Duration::from_secs(45);

/// What `sr-soak run` was asked to do.
pub struct Options {
    /// Length of the fault schedule.
    pub minutes: f64,
    /// The schedule's seed.
    pub seed: u64,
    /// Where the records, the summary and the picture go (emptied first).
    pub out: PathBuf,
    /// The writers to start.
    pub writers: Vec<WriterSpec>,
    /// Run on the netns LAN: every node and every writer on its own host, and partitions in
    /// the schedule (needs root).
    pub net: bool,
    /// Extra query keys of every writer's URL (e.g. `wait_replicas=2`).
    pub url_extra: Vec<(String, String)>,
}

/// Runs the soak; returns the checker's exit code (0 when every check passed).
pub fn run(opts: Options) -> Result<i32, String> {
    println!(
        "sr-soak: seed {} ({} min, {}, URL extra {:?}); replay with SEED={}",
        opts.seed,
        opts.minutes,
        if opts.net {
            "netns LAN with partitions"
        } else {
            "loopback"
        },
        opts.url_extra,
        opts.seed
    );
    let _ = std::fs::remove_dir_all(&opts.out);
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let out = opts.out.as_path();
    let sink = |name: &str| Sink::create(&out.join(name)).map_err(|e| format!("{name}: {e}"));
    let (events, samples, faults) = (
        sink("events.jsonl")?,
        sink("samples.jsonl")?,
        sink("faults.jsonl")?,
    );

    let spec = TopologySpec {
        down_after_ms: DOWN_AFTER_MS,
        ..TopologySpec::default()
    };
    let cluster = Cluster::start(spec.clone(), opts.net.then_some(opts.writers.len()))
        .map_err(|e| format!("starting the topology: {e}"))?;
    let sentinel_ports: Vec<u16> = cluster
        .topo()
        .sentinels()
        .iter()
        .map(|s| s.port())
        .collect();
    let sentinel_at: Vec<SentinelAt> = cluster
        .topo()
        .sentinels()
        .iter()
        .map(|s| SentinelAt {
            port: s.port(),
            netns: s.netns().map(str::to_string),
        })
        .collect();
    let pids: Arc<Mutex<Vec<(String, u32)>>> = Arc::default();
    let recorders = {
        let pids = pids.clone();
        Recorders::start(
            sentinel_at,
            cluster.proxies.clone(),
            events,
            samples,
            move || pids.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        )
    };

    // A quiet baseline: what the sentinels and the recorders cost before any writer runs.
    std::thread::sleep(Duration::from_secs(4));
    let writers_started_ms = now_ms();
    let stop = out.join("STOP");
    let mut writers = Vec::new();
    let mut hosts = Vec::new();
    for (k, w) in opts.writers.iter().enumerate() {
        let timeout = COMMAND_TIMEOUT_MS.to_string();
        let mut query: Vec<(&str, &str)> = vec![
            ("command_timeout_ms", &timeout),
            ("client_name", &w.id),
            ("read_from", &w.read_from),
        ];
        query.extend(opts.url_extra.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let url = cluster.topo().url_with(None, None, &query);
        let netns = cluster
            .writer_netns(k)
            .map_err(|e| format!("the host of writer {}: {e}", w.id))?;
        hosts.push(json!({"writer": w.id, "netns": netns}));
        let started = Writer::start(w.clone(), &url, out, &stop, netns.as_deref())
            .map_err(|e| format!("starting writer {}: {e}", w.id))?;
        pids.lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((w.id.clone(), started.pid()));
        writers.push(started);
    }
    wait_until(
        Duration::from_secs(60),
        "every writer's first acknowledged write",
        || writers.iter().all(|w| first_ok(&w.log)).then_some(()),
    )
    .map_err(|e| format!("{e}; see the writers' .out files in {}", out.display()))?;
    let start_ms = now_ms();

    // The schedule: a fault, the wait for health, a quiet pause; until the time is up.
    let mut rng = Rng::new(opts.seed);
    let writer_ids: Vec<String> = opts.writers.iter().map(|w| w.id.clone()).collect();
    let end = Instant::now() + Duration::from_secs_f64(opts.minutes * 60.0);
    let mut n = 0;
    while Instant::now() < end {
        let pause = rng.range(1500, 4000);
        std::thread::sleep(Duration::from_millis(pause));
        let fault = Fault::pick(&mut rng, opts.net);
        n += 1;
        let mut rec = fault.run(&cluster, &mut rng, DOWN_AFTER_MS, &writer_ids);
        let healed = cluster.wait_healthy(HEAL_TIMEOUT);
        if let Err(why) = &healed {
            cluster.repair();
            let again = cluster.wait_healthy(HEAL_TIMEOUT);
            rec["repaired"] = json!(again.is_ok());
            rec["unhealed"] = json!(why);
        }
        rec["healthy_at"] = json!(now_ms());
        println!(
            "sr-soak: fault {n} {} on {}: {}{}",
            rec["kind"].as_str().unwrap_or(""),
            rec["target"].as_str().unwrap_or(""),
            rec["detail"].as_str().unwrap_or(""),
            if healed.is_ok() {
                ""
            } else {
                " (did not heal by itself)"
            }
        );
        faults.put(&rec);
    }

    // Quiet end: writers keep going on a healthy topology, then stop on their own.
    cluster.repair();
    let primary = cluster
        .wait_healthy(HEAL_TIMEOUT)
        .map_err(|e| format!("topology not healthy at the end: {e}"))?;
    std::thread::sleep(Duration::from_secs(3));
    std::fs::write(&stop, b"").map_err(|e| format!("{}: {e}", stop.display()))?;
    let mut exits = Vec::new();
    for w in &mut writers {
        exits.push(json!({"writer": w.spec.id, "exit": w.finish(Duration::from_secs(20))}));
    }
    let end_ms = now_ms();
    drop(recorders);

    let final_data = read_final(&cluster, primary, &opts.writers)?;
    std::fs::write(out.join("final.json"), final_data.to_string()).map_err(|e| e.to_string())?;
    let meta = json!({
        "seed": opts.seed,
        "minutes": opts.minutes,
        "writers_started_ms": writers_started_ms,
        "start_ms": start_ms,
        "end_ms": end_ms,
        "faults": n,
        "down_after_ms": DOWN_AFTER_MS,
        "command_timeout_ms": COMMAND_TIMEOUT_MS,
        "service": spec.service,
        "net": opts.net,
        "writer_hosts": hosts,
        "url_extra": opts.url_extra.iter().map(|(k, v)| (k.clone(), json!(v)))
            .collect::<serde_json::Map<String, Value>>(),
        "server": spec.server.name(),
        "sentinels": sentinel_ports,
        "proxies": cluster.proxies.iter().enumerate().zip(cluster.topo().data_nodes())
            .map(|((i, p), n)| json!({"proxy": p.port(), "ip": cluster.proxy_addr(i).0,
                                      "node": n.port()})).collect::<Vec<_>>(),
        "writers": writers.iter().map(|w| json!({"id": w.spec.id, "lang": w.spec.lang,
            "read_from": w.spec.read_from, "pid": w.pid()})).collect::<Vec<_>>(),
        "writer_exits": exits,
    });
    std::fs::write(
        out.join("meta.json"),
        serde_json::to_string_pretty(&meta).unwrap_or_default(),
    )
    .map_err(|e| e.to_string())?;
    drop(writers);
    drop(cluster);
    crate::check::check_dir(out)
}

fn first_ok(log: &Path) -> bool {
    crate::jsonl::read(log)
        .map(|recs| recs.iter().any(|r| r["ok"] == json!(true)))
        .unwrap_or(false)
}

/// Every writer's list and counter, read from the primary (data node index `primary`).
fn read_final(c: &Cluster, primary: usize, writers: &[WriterSpec]) -> Result<Value, String> {
    let node = c.topo().data_nodes()[primary];
    let mut out = serde_json::Map::new();
    for w in writers {
        let list = node
            .cmd_with_timeout(
                &["LRANGE", &format!("soak:l:{}", w.id), "0", "-1"],
                POLL * 20,
            )
            .map_err(|e| format!("reading the final list of {}: {e}", w.id))?;
        let values: Vec<u64> = list
            .as_array()
            .unwrap_or(&[])
            .iter()
            .filter_map(|v| v.as_str()?.parse().ok())
            .collect();
        let counter = node
            .cmd_with_timeout(&["GET", &format!("soak:c:{}", w.id)], POLL * 4)
            .map_err(|e| format!("reading the final counter of {}: {e}", w.id))?
            .as_str()
            .and_then(|s| s.parse::<u64>().ok());
        out.insert(w.id.clone(), json!({"list": values, "counter": counter}));
    }
    Ok(Value::Object(out))
}
