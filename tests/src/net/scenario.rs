//! The partition scenarios of issue 28 (A-E), driven on a [`NetTopology`] with one writer process
//! on each of two client hosts and judged by the set-full checker ([`crate::setfull`]).
//!
//! The driver asserts nothing about losses: it reports them ([`ScenarioRun`]) so the default
//! mode's losses can be written down and a run with the durability options (extra URL keys,
//! [`ScenarioSpec::url_extra`]) can be required to lose none.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::topology::{Host, NetSpec, NetTopology};
use crate::proxy::LinkFaults;
use crate::setfull::{self, Outcome, Report};
use crate::topology::spawn_owned_child;
use crate::{wait_until, Reply, TestkitError, Topology, TopologySpec};

/// The set the writers add to (the writers' own constant).
pub const SET_KEY: &str = "partitions:set";

/// One of issue 28's partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scenario {
    /// The primary and client-1 cut from the replicas, the sentinels and client-2 (Jepsen's
    /// shape); healed once the majority has failed over.
    A,
    /// Client-1 cut from every sentinel (not from the data nodes) during a planned
    /// `SENTINEL FAILOVER`; healed once it finished.
    B,
    /// The primary cut from the sentinels and replicas while both clients still reach it;
    /// healed once the majority has failed over.
    C,
    /// Latency and loss on every link into every node (the fault proxies), no cut: no failover.
    D,
    /// The sentinels split so no two see the same majority (sentinel-1 and -2 cut from each other
    /// and from the primary; sentinel-3 sees all): no failover.
    E,
}

impl Scenario {
    /// `A` ... `E`.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::A => "A",
            Scenario::B => "B",
            Scenario::C => "C",
            Scenario::D => "D",
            Scenario::E => "E",
        }
    }

    /// `A` ... `E` (any case).
    pub fn parse(s: &str) -> Option<Scenario> {
        [
            Scenario::A,
            Scenario::B,
            Scenario::C,
            Scenario::D,
            Scenario::E,
        ]
        .into_iter()
        .find(|x| x.name().eq_ignore_ascii_case(s))
    }

    /// True when the scenario makes the sentinels fail over.
    pub fn fails_over(self) -> bool {
        matches!(self, Scenario::A | Scenario::B | Scenario::C)
    }
}

/// A writer program: run as `program args... URL ID LOG STOPFILE` on a client host; it must add
/// `<ID>-<n>` values to [`SET_KEY`] and log the set-full history to LOG until STOPFILE exists.
#[derive(Debug, Clone)]
pub struct WriterProgram {
    /// Executable.
    pub program: PathBuf,
    /// Arguments before the four of the protocol (e.g. a script's path).
    pub args: Vec<String>,
}

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct ScenarioSpec {
    /// Which partition.
    pub scenario: Scenario,
    /// The writer on both client hosts.
    pub writer: WriterProgram,
    /// Extra query keys of the client URL (e.g. `wait_replicas=1`).
    pub url_extra: Vec<(String, String)>,
    /// How long the fault of D lasts (issue 28: a minute; the short suite uses less).
    pub d_duration: Duration,
    /// How long the cut stays after the failover (A, B, C) or in all (E).
    pub hold: Duration,
}

impl ScenarioSpec {
    /// `scenario` with `writer`, default URL, D for 20 s, a 2 s hold.
    pub fn new(scenario: Scenario, writer: WriterProgram) -> ScenarioSpec {
        ScenarioSpec {
            scenario,
            writer,
            url_extra: Vec::new(),
            d_duration: Duration::from_secs(20),
            hold: Duration::from_secs(2),
        }
    }
}

/// What a scenario run saw.
#[derive(Debug, Clone)]
pub struct ScenarioRun {
    /// The checker's verdict (writer `w1` ran on client-1, `w2` on client-2).
    pub report: Report,
    /// The primary the sentinels reported before the fault and after heal.
    pub primary_before: (String, u16),
    /// See `primary_before`.
    pub primary_after: (String, u16),
    /// Event lines in all sentinel logs since the start, by event (`+sdown`, `+odown`,
    /// `+switch-master`, `+tilt`, ...): `+sdown master` counts as `+sdown-master`.
    pub sentinel_events: BTreeMap<String, usize>,
    /// Each writer's first acknowledged write after heal that the current primary holds: the
    /// writer follows the primary again (ms after heal), `None` when it did not in time.
    pub followed_after_heal_ms: BTreeMap<String, Option<u64>>,
    /// Fault start and heal, unix ms.
    pub fault_at_ms: u64,
    /// Median duration of the calls started between fault and heal, all writers, in ms.
    pub median_call_during_fault_ms: u64,
    /// When the testkit saw every sentinel report the new primary (A, B, C), unix ms.
    pub failover_seen_at_ms: Option<u64>,
    /// See `fault_at_ms`.
    pub heal_at_ms: u64,
    /// Commands the sentinels processed per second between fault and heal, all three together
    /// (their `total_commands_processed`): the writers' monitors plus the sentinels' own traffic
    /// among themselves, so a client that storms the sentinels under a fault shows here.
    pub sentinel_commands_per_s: f64,
    /// The same rate over 3 s before the fault, writers connected and writing, nothing cut
    /// (scenario D only; for the others a window too short to mean anything): what the fault
    /// added is the difference.
    pub sentinel_commands_per_s_before: f64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A writer process on a client host; killed on drop if it did not stop.
struct WriterProc {
    id: String,
    log: PathBuf,
    child: Child,
}

impl Drop for WriterProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one scenario from start to judgement on a fresh [`NetTopology`] (needs root).
pub fn run(spec: &ScenarioSpec) -> Result<ScenarioRun, TestkitError> {
    let net = NetTopology::start(NetSpec {
        topology: TopologySpec::default(),
        clients: 2,
        link_proxies: spec.scenario == Scenario::D,
    })?;
    let extra: Vec<(&str, &str)> = spec
        .url_extra
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let url = net.url(&extra);
    let dir = net.topology().dir().to_path_buf();
    let stop = dir.join("writers.stop");
    let mut writers = [("w1", Host::Client(1)), ("w2", Host::Client(2))]
        .into_iter()
        .map(|(id, host)| start_writer(&net, &spec.writer, host, id, &url, &dir, &stop))
        .collect::<Result<Vec<_>, _>>()?;
    let result = drive(&net, spec, &writers);
    // The writers stop (and are killed if they do not) whatever happened.
    let _ = std::fs::write(&stop, b"");
    // A writer still running then is killed when its WriterProc drops.
    let _ = wait_until(Duration::from_secs(15), "writers to stop", || {
        writers
            .iter_mut()
            .all(|w| matches!(w.child.try_wait(), Ok(Some(_))))
            .then_some(())
    });
    let Driven {
        sentinel_commands_per_s,
        sentinel_commands_per_s_before,
        fault_at_ms,
        failover_seen_at_ms,
        heal_at_ms,
        primary_before,
        followed,
    } = result?;
    let t = net.topology();
    // The final read: after every running data node caught up with the primary.
    t.wait_replication(Duration::from_secs(30))?;
    let primary = t
        .current_primary()
        .ok_or_else(|| TestkitError::Setup("no primary reported after heal".into()))?;
    let members = primary.cmd(&["SMEMBERS", SET_KEY])?;
    let final_set: HashSet<String> = members
        .as_array()
        .unwrap_or(&[])
        .iter()
        .filter_map(Reply::as_str)
        .collect();
    let mut ops = Vec::new();
    for w in &writers {
        ops.extend(setfull::read_history(&w.log)?);
    }
    let report = setfull::check(&ops, &final_set, fault_at_ms);
    let mut during: Vec<u64> = ops
        .iter()
        .filter(|o| o.t0 >= fault_at_ms && o.t0 < heal_at_ms)
        .map(|o| o.t1 - o.t0)
        .collect();
    during.sort_unstable();
    let median_call_during_fault_ms = during.get(during.len() / 2).copied().unwrap_or(0);
    Ok(ScenarioRun {
        report,
        primary_after: t
            .reported_primary()
            .ok_or_else(|| TestkitError::Setup("no sentinel answered after heal".into()))?,
        primary_before,
        sentinel_events: sentinel_events(&net),
        followed_after_heal_ms: followed,
        fault_at_ms,
        failover_seen_at_ms,
        heal_at_ms,
        median_call_during_fault_ms,
        sentinel_commands_per_s,
        sentinel_commands_per_s_before,
    })
}

/// Commands all sentinels have processed so far (`INFO stats`, asked on each sentinel's own
/// 127.0.0.1, which no cut or fault proxy touches).
fn sentinel_commands(t: &Topology) -> Result<u64, TestkitError> {
    let mut total = 0;
    for s in t.sentinels() {
        let stats = s.info("stats")?;
        total += stats
            .get("total_commands_processed")
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| {
                TestkitError::Setup(format!(
                    "sentinel {} has no total_commands_processed",
                    s.addr()
                ))
            })?;
    }
    Ok(total)
}

fn start_writer(
    net: &NetTopology,
    writer: &WriterProgram,
    host: Host,
    id: &str,
    url: &str,
    dir: &Path,
    stop: &Path,
) -> Result<WriterProc, TestkitError> {
    let log = dir.join(format!("{id}.jsonl"));
    let mut cmd = net.command_on(host, &writer.program)?;
    cmd.args(&writer.args)
        .arg(url)
        .arg(id)
        .arg(&log)
        .arg(stop)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(
            std::fs::File::create(dir.join(format!("{id}.stderr")))
                .map(Stdio::from)
                .unwrap_or_else(|_| Stdio::null()),
        );
    let child = spawn_owned_child(cmd)
        .map_err(|e| TestkitError::io(format!("starting {}", writer.program.display()), e))?;
    Ok(WriterProc {
        id: id.to_string(),
        log,
        child,
    })
}

/// What [`drive`] saw (see [`ScenarioRun`]).
struct Driven {
    sentinel_commands_per_s: f64,
    sentinel_commands_per_s_before: f64,
    fault_at_ms: u64,
    failover_seen_at_ms: Option<u64>,
    heal_at_ms: u64,
    primary_before: (String, u16),
    followed: BTreeMap<String, Option<u64>>,
}

/// Warm-up, fault, heal, and the wait for each writer to follow the primary again.
fn drive(
    net: &NetTopology,
    spec: &ScenarioSpec,
    writers: &[WriterProc],
) -> Result<Driven, TestkitError> {
    let t = net.topology();
    let before = t
        .reported_primary()
        .ok_or_else(|| TestkitError::Setup("no sentinel answered".into()))?;
    // Warm-up: every writer acknowledged a few writes.
    wait_until(Duration::from_secs(30), "every writer's first acks", || {
        writers
            .iter()
            .all(|w| acks(&w.log).len() >= 20)
            .then_some(())
    })
    .map_err(|e| e.with_detail(&writer_errors(writers)))?;
    let sentinels: Vec<Host> = (1..=t.sentinels().len()).map(Host::Sentinel).collect();
    let replicas: Vec<Host> = (1..=t.replicas().len()).map(Host::Replica).collect();
    // D judges what its fault adds to the sentinels' load: the steady rate before it (writers
    // connected and writing, their start-up over) is the baseline. The other scenarios skip it.
    let steady_from = now_ms();
    let steady_commands = sentinel_commands(t)?;
    if spec.scenario == Scenario::D {
        std::thread::sleep(Duration::from_secs(3));
    }
    let commands_before = sentinel_commands(t)?;
    let fault_at = now_ms();
    let steady_secs = (fault_at.saturating_sub(steady_from)).max(1) as f64 / 1000.0;
    let failover_wait = Duration::from_secs(40);
    let mut failover_seen = None;
    match spec.scenario {
        Scenario::A => {
            let mut majority = replicas.clone();
            majority.extend(&sentinels);
            majority.push(Host::Client(2));
            net.partition(&[vec![Host::Primary, Host::Client(1)], majority])?;
            t.wait_for_reported_primary(|a| *a != before, failover_wait)?;
            failover_seen = Some(now_ms());
        }
        Scenario::B => {
            net.cut(&[Host::Client(1)], &sentinels)?;
            t.sentinel_failover()?;
            t.wait_for_reported_primary(|a| *a != before, failover_wait)?;
            failover_seen = Some(now_ms());
        }
        Scenario::C => {
            let mut others = replicas.clone();
            others.extend(&sentinels);
            net.cut(&[Host::Primary], &others)?;
            t.wait_for_reported_primary(|a| *a != before, failover_wait)?;
            failover_seen = Some(now_ms());
        }
        Scenario::D => {
            net.set_link_faults(LinkFaults {
                latency: Duration::from_millis(50),
                loss_percent: 20,
                blackhole: false,
            })?;
            std::thread::sleep(spec.d_duration);
        }
        Scenario::E => {
            net.cut(&[Host::Sentinel(1)], &[Host::Sentinel(2)])?;
            net.cut(&[Host::Primary], &[Host::Sentinel(1), Host::Sentinel(2)])?;
        }
    }
    match spec.scenario {
        Scenario::D => {}
        // Long enough for the cut-off sentinels to see the primary down and ask each other for
        // its odown several times (down-after is 1 s).
        Scenario::E => std::thread::sleep(spec.hold.max(Duration::from_secs(5))),
        // The isolated side keeps going for a while: that is where losses come from.
        _ => std::thread::sleep(spec.hold),
    }
    let commands_at_heal = sentinel_commands(t)?;
    let fault_secs = (now_ms().saturating_sub(fault_at)).max(1) as f64 / 1000.0;
    net.heal()?;
    if spec.scenario == Scenario::D {
        net.set_link_faults(LinkFaults::default())?;
    }
    let heal_at = now_ms();
    // The sentinels agree again, the old primary is a replica again when there was a failover,
    // and replication caught up.
    let after = t.wait_for_reported_primary(|_| true, Duration::from_secs(30))?;
    if after != before {
        wait_until(
            Duration::from_secs(30),
            "the old primary to be a replica",
            || (t.primary().role().as_deref() == Some("slave")).then_some(()),
        )?;
    }
    t.wait_replication(Duration::from_secs(30))?;
    let followed = writers
        .iter()
        .map(|w| (w.id.clone(), follows(net, w, heal_at)))
        .collect();
    Ok(Driven {
        sentinel_commands_per_s: commands_at_heal.saturating_sub(commands_before) as f64
            / fault_secs,
        sentinel_commands_per_s_before: commands_before.saturating_sub(steady_commands) as f64
            / steady_secs,
        fault_at_ms: fault_at,
        failover_seen_at_ms: failover_seen,
        heal_at_ms: heal_at,
        primary_before: before,
        followed,
    })
}

/// Waits (up to 30 s) until the writer's latest acknowledged write after `heal_at` is on the
/// current primary; returns how long after heal that write started.
fn follows(net: &NetTopology, w: &WriterProc, heal_at: u64) -> Option<u64> {
    let t = net.topology();
    wait_until(
        Duration::from_secs(30),
        "a writer to follow the primary",
        || {
            let last = acks(&w.log)
                .into_iter()
                .filter(|o| o.t0 >= heal_at)
                .max_by_key(|o| o.t0)?;
            let primary = t.current_primary()?;
            let r = primary.cmd(&["SISMEMBER", SET_KEY, &last.v]).ok()?;
            (r.as_int() == Some(1)).then_some(last.t0 - heal_at)
        },
    )
    .ok()
}

fn acks(log: &Path) -> Vec<setfull::Op> {
    setfull::read_history(log)
        .unwrap_or_default()
        .into_iter()
        .filter(|o| o.outcome == Outcome::Ok)
        .collect()
}

fn writer_errors(writers: &[WriterProc]) -> String {
    writers
        .iter()
        .map(|w| {
            let err = std::fs::read_to_string(w.log.with_extension("stderr")).unwrap_or_default();
            let last = setfull::read_history(&w.log)
                .unwrap_or_default()
                .last()
                .and_then(|o| o.err.clone())
                .unwrap_or_default();
            format!("{}: stderr {:?}, last error {:?}", w.id, err.trim(), last)
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Counts event lines (` +event` / ` -event` after the log's `#` or `*` mark) in every
/// sentinel's log; `+sdown`, `+odown` of the master get a `-master` suffix.
fn sentinel_events(net: &NetTopology) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for s in net.topology().sentinels() {
        let text = std::fs::read_to_string(s.log_path()).unwrap_or_default();
        for line in text.lines() {
            let Some(pos) = line.find(" # ").or_else(|| line.find(" * ")) else {
                continue;
            };
            let mut words = line[pos + 3..].split_whitespace();
            let Some(event) = words.next() else { continue };
            if !(event.starts_with('+') || event.starts_with('-')) {
                continue;
            }
            let key = match words.next() {
                Some("master") if event.ends_with("down") => format!("{event}-master"),
                _ => event.to_string(),
            };
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}
