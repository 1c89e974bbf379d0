"""The fencing proxy beside a direct connection and HAProxy's Sentinel pattern, in ONE run (issue 37,
point 4). Run through bench/proxy/run.sh (it installs and builds what this needs):

    bench/proxy/run.sh [--rounds 3] [--lat-n 20000] [--client-n 10000] [--tp-n 200000]
                       [--idle 2000] [--writers 8] [--pre 2] [--post 3] [--faults planned,kill9]

Paths, all to loopback: `direct` (the primary's own port), `proxy` (`sentinel-recovery proxy URL
--listen 127.0.0.1:0`, release build), `HAProxy` (Debian's haproxy, the Redis Helm charts'
pattern: tcp-check PING, `info replication` / `expect string role:master`, QUIT; `check inter 1s
fall 1 rise 1 on-marked-down shutdown-sessions`; servers: the primary and both replicas).

1. One topology (`sr-topology up`: 1 primary, 2 replicas, 3 sentinels, quorum 2, down-after
   1000 ms) with both middleboxes in front of it, measured in interleaved rounds (each round
   starts one path later):
   a) sequential latency: `redis-benchmark -c 1 -n LAT_N -t get` (its p50 and mean) and a plain
      redis-py GET loop (bench/proxy/clients.py getloop; p50 and mean per call); median over rounds.
   b) throughput: `redis-benchmark -c 50 -P 16 -t get,set -n TP_N`; median over rounds. The CPU
      time (utime + stime from /proc/PID/stat) of the middlebox process, and of the primary's
      redis-server, over these runs divided by the commands they carried.
   d) memory per idle session: IDLE connections (one PING each, then idle), the RSS delta
      (/proc/PID/status VmRSS) of the middlebox process / IDLE; for `direct`, redis-server's.
2. c) For each fault (planned: `SENTINEL FAILOVER`; kill9: kill -9 of the primary) and each path,
   a fresh topology: WRITERS threads of plain redis-py (clients.py writers: no retries) SADD unique
   ids through the path for PRE seconds, the fault, until all sentinels report another primary
   (planned: and until the old primary, which Sentinel reconfigures seconds after the promotion,
   answers ROLE as a replica; kill9: the killed node stays down, unless --restart-after S:
   then it is restarted S seconds after that, empty, as a supervisor would, and writers run
   until it too is a replica), POST seconds more; then one SMEMBERS on the new primary. The same with the in-process client
   (WRITERS processes of the testkit's `sr-set-writer`, the Rust client on the sentinel URL, which
   pauses 10 ms between calls) for the write-gap goal. lost = acknowledged with reply 1 but
   absent; applied twice = reply 0 (ids are unique); write gap = the longest time between two
   acknowledged writes (from the last one to the writers' stop when writes never came back).

Prints a markdown report (also written to --out, with every figure in --json). Every process
started here is stopped by its own pid at the end, also on failure or SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import redis  # plain redis-py, for the final read and the old primary's ROLE

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
KEY = "partitions:set"
PATHS = ["direct", "proxy", "haproxy"]
NAMES = {"direct": "direct", "proxy": "proxy", "haproxy": "HAProxy", "inproc": "in-process client"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[bench-proxy {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------
# Processes: every one is registered and stopped by its own pid.

class Procs:
    def __init__(self) -> None:
        self.items: list[tuple[str, subprocess.Popen]] = []

    def start(self, name: str, argv: list[str], **kw) -> subprocess.Popen:
        p = subprocess.Popen(argv, **kw)
        self.items.append((name, p))
        return p

    def stop(self, p: subprocess.Popen, timeout: float = 10.0) -> None:
        """Closes its stdin (sr-topology and the idle client stop on EOF), then SIGTERM, then
        SIGKILL, each to this pid only."""
        if p.stdin and not p.stdin.closed:
            try:
                p.stdin.close()
            except OSError:
                pass
            try:
                p.wait(timeout=timeout * 3)
            except subprocess.TimeoutExpired:
                pass
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdout, p.stderr):
            if f and not f.closed:
                f.close()
        self.items = [(n, q) for n, q in self.items if q is not p]

    def stop_all(self) -> None:
        for name, p in reversed(list(self.items)):
            if p.poll() is None:
                log(f"stopping {name} (pid {p.pid})")
            self.stop(p)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK  # utime, stime (fields 14, 15)


def status_field(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for pid {pid}")


def wait_for(what: str, check, timeout: float = 30.0, every: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = check()
        if v:
            return v
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(every)


def resp_call(port: int, line: bytes, timeout: float = 2.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(line)
        data = b""
        while not data.endswith(b"\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


# ------------------------------------------------------------------------------------------------
# The topology and the two middleboxes.

class Topology:
    def __init__(self, procs: Procs, work: Path, tag: str):
        self.procs = procs
        self.err = open(work / f"topology-{tag}.err", "w")
        self.p = procs.start("sr-topology", [str(TARGET / "debug" / "sr-topology"), "up", "--json"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
                             text=True, bufsize=1)
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"sr-topology did not start (see {self.err.name})")
        self.info = json.loads(line)
        self.url = self.info["url"]
        self.primary_port = self.info["primary"]["port"]
        self.primary_pid = self.info["primary"]["pid"]
        self.data_ports = [self.primary_port] + [r["port"] for r in self.info["replicas"]]

    def cmd(self, line: str) -> dict:
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        reply = self.p.stdout.readline()
        if not reply:
            raise RuntimeError(f"sr-topology exited during {line!r}")
        v = json.loads(reply)
        if not v.get("ok"):
            raise RuntimeError(f"sr-topology {line!r}: {v}")
        return v

    def close(self) -> None:
        self.procs.stop(self.p)
        self.err.close()


class OurProxy:
    name = "proxy"

    def __init__(self, procs: Procs, work: Path, url: str, tag: str):
        self.procs = procs
        self.out_path = work / f"proxy-{tag}.out"
        self.out = open(self.out_path, "w")
        self.p = procs.start("sentinel-recovery proxy",
                             [str(TARGET / "release" / "sentinel-recovery"), "proxy", url,
                              "--listen", "127.0.0.1:0"],
                             stdout=self.out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.p.pid

        def listening():
            if self.p.poll() is not None:
                raise RuntimeError(f"the proxy exited: {self.out_path.read_text()}")
            m = re.search(r"^listening 127\.0\.0\.1:(\d+)", self.out_path.read_text(), re.M)
            return int(m.group(1)) if m else None

        self.port = wait_for("the proxy's listening line", listening)
        wait_for("PONG through the proxy", lambda: resp_call(self.port, b"PING\r\n") == b"+PONG\r\n")

    def close(self) -> None:
        self.procs.stop(self.p)
        self.out.close()


HAPROXY_CFG = """\
global
    maxconn 4096
    stats socket {sock} mode 600 level admin

defaults
    mode tcp
    maxconn 4096
    timeout connect 1s
    timeout client 1h
    timeout server 1h
    timeout check 1s

frontend redis
    bind 127.0.0.1:{port}
    default_backend redis_primary

# The Redis Helm charts' pattern (redis-ha, Argo CD): only the node answering role:master is up.
backend redis_primary
    option tcp-check
    tcp-check connect
    tcp-check send PING\\r\\n
    tcp-check expect string +PONG
    tcp-check send info\\ replication\\r\\n
    tcp-check expect string role:master
    tcp-check send QUIT\\r\\n
    tcp-check expect string +OK
{servers}
"""


class HAProxy:
    name = "haproxy"

    def __init__(self, procs: Procs, work: Path, topo: Topology, tag: str):
        self.procs = procs
        self.port = free_port()
        self.sock = work / f"haproxy-{tag}.sock"
        servers = "\n".join(
            f"    server n{i} 127.0.0.1:{p} check inter 1s fall 1 rise 1 on-marked-down shutdown-sessions"
            for i, p in enumerate(topo.data_ports))
        cfg = work / f"haproxy-{tag}.cfg"
        cfg.write_text(HAPROXY_CFG.format(sock=self.sock, port=self.port, servers=servers))
        self.out = open(work / f"haproxy-{tag}.out", "w")
        self.p = procs.start("haproxy", ["haproxy", "-db", "-f", str(cfg)], stdout=self.out,
                             stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.pid = self.p.pid
        primary = f"n{topo.data_ports.index(topo.primary_port)}"

        def only_primary_up():
            if self.p.poll() is not None:
                raise RuntimeError(f"haproxy exited: {Path(self.out.name).read_text()}")
            try:
                st = self.servers()
            except OSError:
                return False
            return st.get(primary, "").startswith("UP") and all(
                v.startswith("DOWN") for k, v in st.items() if k != primary)

        wait_for("HAProxy to mark only the primary up", only_primary_up)

    def servers(self) -> dict[str, str]:
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.sock))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        rows = list(csv.reader(io.StringIO(data.decode().lstrip("# "))))
        head = rows[0]
        i_px, i_sv, i_st = head.index("pxname"), head.index("svname"), head.index("status")
        return {r[i_sv]: r[i_st] for r in rows[1:]
                if len(r) > i_st and r[i_px] == "redis_primary" and r[i_sv].startswith("n")}

    def close(self) -> None:
        self.procs.stop(self.p)
        self.out.close()


# ------------------------------------------------------------------------------------------------
# Measurements.

def redis_benchmark(port: int, args: list[str]) -> dict[str, dict[str, float]]:
    out = subprocess.run(["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), *args, "--csv"],
                         capture_output=True, text=True, timeout=900, check=True).stdout
    rows = list(csv.DictReader(io.StringIO(out)))
    return {r["test"]: {k: float(v) for k, v in r.items() if k != "test"} for r in rows}


def py(*args: str) -> list[str]:
    return [sys.executable, str(HERE / "clients.py"), *args]


def getloop(port: int, n: int) -> dict:
    out = subprocess.run(py("getloop", "127.0.0.1", str(port), str(n)), capture_output=True,
                         text=True, timeout=900, check=True).stdout
    return json.loads(out)


def idle_memory(procs: Procs, port: int, pid: int, n: int) -> float:
    """KiB of RSS per idle session of process `pid`."""
    time.sleep(0.5)
    before = status_field(pid, "VmRSS")
    p = procs.start("idle client", py("idle", "127.0.0.1", str(port), str(n)),
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        if not line.startswith("ready"):
            raise RuntimeError(f"idle client: {line!r}")
        time.sleep(1.0)
        after = status_field(pid, "VmRSS")
    finally:
        procs.stop(p)
    return (after - before) / n


def steady_state(a: argparse.Namespace, procs: Procs, work: Path) -> dict:
    res: dict = {p: {} for p in PATHS}
    topo = Topology(procs, work, "main")
    boxes = []
    try:
        log(f"topology up: {topo.url}; primary port {topo.primary_port}")
        boxes.append(OurProxy(procs, work, topo.url, "main"))
        boxes.append(HAProxy(procs, work, topo, "main"))
        port = {"direct": topo.primary_port, "proxy": boxes[0].port, "haproxy": boxes[1].port}
        pid = {"direct": topo.primary_pid, "proxy": boxes[0].pid, "haproxy": boxes[1].pid}
        res["threads"] = {"proxy": status_field(boxes[0].pid, "Threads"),
                          "haproxy": status_field(boxes[1].pid, "Threads")}
        resp_call(topo.primary_port, b"SET key:__rand_int__ xxx\r\n")  # -d 3, as redis-benchmark
        lat_bench = {p: [] for p in PATHS}
        lat_py = {p: [] for p in PATHS}
        tp = {p: [] for p in PATHS}
        cpu = {p: [0.0, 0.0, 0] for p in PATHS}  # middlebox s, server s, commands
        for r in range(a.rounds):
            order = PATHS[r % 3:] + PATHS[:r % 3]
            for p in order:
                log(f"round {r + 1}/{a.rounds} sequential GET: {p}")
                lat_bench[p].append(redis_benchmark(port[p], ["-c", "1", "-n", str(a.lat_n),
                                                              "-t", "get"])["GET"])
                lat_py[p].append(getloop(port[p], a.client_n))
            for p in order:
                log(f"round {r + 1}/{a.rounds} throughput -c 50 -P 16: {p}")
                c0, s0 = cpu_seconds(pid[p]), cpu_seconds(topo.primary_pid)
                tp[p].append(redis_benchmark(port[p], ["-c", "50", "-P", "16", "-n", str(a.tp_n),
                                                       "-t", "get,set"]))
                cpu[p][0] += cpu_seconds(pid[p]) - c0
                cpu[p][1] += cpu_seconds(topo.primary_pid) - s0
                cpu[p][2] += 2 * a.tp_n
        for p in PATHS:
            med = lambda xs: statistics.median(xs)  # noqa: E731
            res[p]["rb_p50_us"] = med([x["p50_latency_ms"] * 1000 for x in lat_bench[p]])
            res[p]["rb_mean_us"] = med([x["avg_latency_ms"] * 1000 for x in lat_bench[p]])
            res[p]["py_p50_us"] = med([x["p50_us"] for x in lat_py[p]])
            res[p]["py_mean_us"] = med([x["mean_us"] for x in lat_py[p]])
            res[p]["get_kops"] = med([x["GET"]["rps"] / 1000 for x in tp[p]])
            res[p]["set_kops"] = med([x["SET"]["rps"] / 1000 for x in tp[p]])
            res[p]["cpu_us_per_cmd"] = cpu[p][0] / cpu[p][2] * 1e6
            res[p]["server_cpu_us_per_cmd"] = cpu[p][1] / cpu[p][2] * 1e6
            res[p]["rounds"] = {"rb": lat_bench[p], "py": lat_py[p], "tp": tp[p]}
        for p in PATHS:
            log(f"memory per idle session ({a.idle} sessions): {p}")
            res[p]["kib_per_session"] = idle_memory(procs, port[p], pid[p], a.idle)
    finally:
        for b in reversed(boxes):
            b.close()
        topo.close()
    return res


def read_history(paths: list[Path]) -> list[dict]:
    out = []
    for p in paths:
        if p.exists():
            with open(p) as f:
                out.extend(json.loads(line) for line in f if line.strip())
    return out


def failover(a: argparse.Namespace, procs: Procs, work: Path, fault: str, path: str) -> dict:
    tag = f"{fault}-{path}"
    topo = Topology(procs, work, tag)
    box = None
    writers: list[subprocess.Popen] = []
    try:
        old = topo.primary_port
        if path == "proxy":
            box = OurProxy(procs, work, topo.url, tag)
        elif path == "haproxy":
            box = HAProxy(procs, work, topo, tag)
        stop = work / f"stop-{tag}"
        if path == "inproc":
            logs = [work / f"writer-{tag}-{i}.jsonl" for i in range(a.writers)]
            for i, lp in enumerate(logs):
                writers.append(procs.start("sr-set-writer", [
                    str(TARGET / "release" / "sr-set-writer"), topo.url, f"r{i}", str(lp),
                    str(stop)], stdin=subprocess.DEVNULL))
        else:
            port = box.port if box else old
            logs = [work / f"writer-{tag}.jsonl"]
            writers.append(procs.start("redis-py writers", py(
                "writers", "127.0.0.1", str(port), str(a.writers), str(logs[0]), str(stop)),
                stdin=subprocess.DEVNULL))
        time.sleep(a.pre)
        t_fault = time.time() * 1000
        topo.cmd("failover" if fault == "planned" else f"kill9 {old}")
        new = topo.cmd(f"wait-primary-not {old} 30000")["port"]
        t_switch = time.time() * 1000
        t_demoted = None
        if fault == "kill9" and a.restart_after is not None:
            # As its supervisor would (systemd, Kubernetes): the killed node comes back, empty
            # (no persistence in the testkit), answering role:master until Sentinel turns it
            # into a replica of the new primary.
            time.sleep(a.restart_after)
            topo.cmd(f"restart {old}")
        if fault == "planned" or a.restart_after is not None:
            # Sentinel turns a reachable old primary into a replica only seconds after the
            # promotion; until then it takes writes. Writers run until that is over, so a path's
            # losses do not depend on how long this bench waits.
            old_node = redis.Redis(host="127.0.0.1", port=old, socket_timeout=2)
            try:
                wait_for("the old primary to become a replica",
                         lambda: old_node.role()[0] in (b"slave", "slave"), timeout=60)
                t_demoted = time.time() * 1000
            finally:
                old_node.close()
        time.sleep(a.post)
        t_stop = time.time() * 1000
        stop.touch()
        for w in writers:
            w.wait(timeout=30)
        time.sleep(1.0)
        now = topo.cmd("primary")["port"]
        if now != new:
            raise RuntimeError(f"the primary moved again ({new} -> {now})")
        r = redis.Redis(host="127.0.0.1", port=new, socket_timeout=10)
        role = r.role()[0]
        if role not in (b"master", "master"):
            raise RuntimeError(f"{new} is {role!r}, not master")
        members = r.smembers(KEY)
        r.close()
    finally:
        for w in writers:
            procs.stop(w)
        if box:
            box.close()
        topo.close()
    hist = read_history(logs)
    acked = [e for e in hist if e["outcome"] == "ok"]
    lost = [e for e in acked if e["reply"] == 1 and e["v"].encode() not in members]
    twice = [e for e in acked if e["reply"] == 0]
    kinds: dict[str, int] = {}
    for e in hist:
        if e["outcome"] != "ok":
            # "Class: message" (redis-py) or "code: message" (sr-set-writer); for a plain error
            # reply, its code word (UNCERTAIN ...).
            cls, _, msg = (e["err"] or "?").partition(": ")
            k = (msg.split() or ["?"])[0] if cls == "ResponseError" else cls
            kinds[k] = kinds.get(k, 0) + 1
    times = sorted(e["t1"] for e in acked)
    gap, gap_at, recovered = 0.0, None, True
    for x, y in zip(times, times[1:]):
        if y - x > gap:
            gap, gap_at = y - x, x
    if times and t_stop - times[-1] > gap:
        gap, gap_at, recovered = t_stop - times[-1], times[-1], False
    return {
        "calls": len(hist), "acked": len(acked), "lost": len(lost), "twice": len(twice),
        "failed": sum(1 for e in hist if e["outcome"] == "fail"),
        "indeterminate": sum(1 for e in hist if e["outcome"] == "info"),
        "lost_after_fault": sum(1 for e in lost if e["t1"] >= t_fault),
        "gap_ms": gap, "gap_from_fault_ms": (gap_at - t_fault) if gap_at else None,
        "recovered": recovered, "switch_ms": t_switch - t_fault, "errors": kinds,
        "demoted_ms": (t_demoted - t_fault) if t_demoted else None,
        "old": old, "new": new,
    }


# ------------------------------------------------------------------------------------------------
# The report.

def fmt(x: float | None, nd: int = 1) -> str:
    if x is None:
        return "–"
    t = f"{x:,.{nd}f}"
    return t[1:] if t.startswith("-") and float(t.replace(",", "")) == 0 else t


def report(a: argparse.Namespace, st: dict, fo: dict, meta: dict) -> str:
    L = []
    w = L.append
    w(f"### Run of {meta['date']} (commit {meta['commit']}"
      f"{'; core/, cli/ or tests/ with uncommitted changes' if meta['dirty'] else ''})")
    w("")
    w(f"Command: `{a.command}`. Machine: {meta['cores']} cores; load average before / after: "
      f"{meta['load_before']} / {meta['load_after']}. {meta['versions']}. Proxy: release build, "
      f"{st['threads']['proxy']} threads; HAProxy: {st['threads']['haproxy']} threads. "
      f"Sequential and throughput figures: median of {a.rounds} interleaved rounds "
      f"(`-n {a.lat_n}` per redis-benchmark `-c 1` run, {a.client_n} GETs per redis-py loop, "
      f"`-n {a.tp_n}` per test of the throughput run). Failovers: {a.writers} writers, "
      f"{a.pre:g} s before the fault, {a.post:g} s after all sentinels report the new primary "
      f"(planned: after the old primary is a replica)" + (
          "; kill -9: the killed node stays down." if a.restart_after is None else
          f"; kill -9: the killed node is restarted {a.restart_after:g} s after the sentinels "
          "agree, as a supervisor would, and writers run until it is a replica."))
    w("")
    w("| figure | direct | proxy | HAProxy |")
    w("|---|---|---|---|")

    def row(label: str, vals: list[str]) -> None:
        w(f"| {label} | " + " | ".join(vals) + " |")

    d, p, h = st["direct"], st["proxy"], st["haproxy"]
    for key, label in [("rb_p50_us", "GET µs, `redis-benchmark -c 1`, p50"),
                       ("rb_mean_us", "GET µs, `redis-benchmark -c 1`, mean"),
                       ("py_p50_us", "GET µs, redis-py loop, p50"),
                       ("py_mean_us", "GET µs, redis-py loop, mean")]:
        row(label, [fmt(d[key]), fmt(p[key]), fmt(h[key])])
    for key, label in [("rb_mean_us", "added µs per GET, redis-benchmark mean"),
                       ("rb_p50_us", "added µs per GET, redis-benchmark p50"),
                       ("py_mean_us", "added µs per GET, redis-py mean")]:
        row(label, ["–", "+" + fmt(p[key] - d[key]), "+" + fmt(h[key] - d[key])])
    for key, label in [("get_kops", "GET k ops/s, `-c 50 -P 16`"),
                       ("set_kops", "SET k ops/s, `-c 50 -P 16`")]:
        row(label, [fmt(d[key]), f"{fmt(p[key])} ({p[key] / d[key]:.2f}×)",
                    f"{fmt(h[key])} ({h[key] / d[key]:.2f}×)"])
    for fault, label in [("planned", "planned failover"), ("kill9", "kill -9 of the primary")]:
        if fault not in fo:
            continue
        f = fo[fault]
        row(f"{label}: acknowledged / **lost** / applied twice",
            [f"{f[x]['acked']:,} / **{f[x]['lost']:,}** / {f[x]['twice']}" for x in PATHS])
        row(f"{label}: write gap ms",
            [fmt(f[x]["gap_ms"], 0) + ("" if f[x]["recovered"] else " (never resumed)")
             for x in PATHS])
    row(f"memory per idle session, KiB (RSS delta / {a.idle:,})",
        [f"{fmt(d['kib_per_session'], 2)} (redis-server)", fmt(p["kib_per_session"], 2),
         fmt(h["kib_per_session"], 2)])
    row("CPU µs per command in the throughput run",
        [f"{fmt(d['cpu_us_per_cmd'], 2)} (redis-server)", fmt(p["cpu_us_per_cmd"], 2),
         fmt(h["cpu_us_per_cmd"], 2)])
    row("redis-server's CPU µs per command, same runs",
        [fmt(x["server_cpu_us_per_cmd"], 2) for x in (d, p, h)])
    w("")
    if fo:
        w(f"Failovers in detail (each a fresh topology; the in-process client is {a.writers} "
          "processes of the testkit's `sr-set-writer`, sentinel-recovery's Rust client on the "
          "sentinel URL, 10 ms between calls):")
        w("")
        w("| fault | path | calls | acknowledged | lost | applied twice | refused | indeterminate "
          "| write gap ms (starts at fault +ms) | fault → sentinels agree / old (or restarted) primary a replica, ms | errors seen |")
        w("|---|---|---|---|---|---|---|---|---|---|---|")
        for fault, f in fo.items():
            for x, r in f.items():
                errs = ", ".join(f"{k} {v}" for k, v in sorted(r["errors"].items(),
                                                               key=lambda kv: -kv[1]))
                w(f"| {fault} | {NAMES[x]} | {r['calls']:,} | {r['acked']:,} | **{r['lost']:,}** "
                  f"| {r['twice']} | {r['failed']:,} | {r['indeterminate']:,} "
                  f"| {fmt(r['gap_ms'], 0)}{'' if r['recovered'] else ' (never resumed)'} "
                  f"({fmt(r['gap_from_fault_ms'], 0)}) | {fmt(r['switch_ms'], 0)} / {fmt(r['demoted_ms'], 0)} "
                  f"| {errs or '–'} |")
        w("")
    w("Goals (issue 37):")
    w("")
    verdict = lambda ok: "**met**" if ok else "**not met**"  # noqa: E731
    if "planned" in fo:
        f = fo["planned"]
        ok = f["proxy"]["lost"] == 0 and f["proxy"]["twice"] == 0
        w(f"- 0 acknowledged writes lost in the planned failover: {verdict(ok)}: proxy "
          f"{f['proxy']['lost']} lost, {f['proxy']['twice']} applied twice; HAProxy "
          f"{f['haproxy']['lost']:,} lost; direct {f['direct']['lost']:,} lost.")
    parts = []
    all_ok = True
    for key, label in [("rb_p50_us", "redis-benchmark p50"), ("rb_mean_us", "redis-benchmark mean"),
                       ("py_mean_us", "redis-py mean")]:
        ap, ah = p[key] - d[key], h[key] - d[key]
        all_ok &= ap <= ah
        parts.append(f"{label} +{ap:.1f} vs +{ah:.1f} µs")
    w(f"- added latency per command ≤ HAProxy's: {verdict(all_ok)} ({'; '.join(parts)}).")
    parts = []
    all_ok = True
    for key, label in [("get_kops", "GET"), ("set_kops", "SET")]:
        ok = p[key] >= h[key] and p[key] >= 0.8 * d[key]
        all_ok &= ok
        parts.append(f"{label} {p[key]:.1f}k vs HAProxy {h[key]:.1f}k, "
                     f"{p[key] / d[key]:.2f}× direct")
    w(f"- throughput ≥ HAProxy's and ≥ 0.8× direct: {verdict(all_ok)} ({'; '.join(parts)}).")
    for fault, label in [("planned", "planned failover"), ("kill9", "kill -9")]:
        if fault in fo and "inproc" in fo[fault]:
            f = fo[fault]
            gp, gi = f["proxy"]["gap_ms"], f["inproc"]["gap_ms"]
            ok = f["proxy"]["recovered"] and gp <= gi + 50
            w(f"- write gap ≤ the in-process client's + 50 ms, {label}: {verdict(ok)} "
              f"(proxy {gp:.0f} ms, in-process {gi:.0f} ms, HAProxy {f['haproxy']['gap_ms']:.0f} ms).")
    return "\n".join(L) + "\n"


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def versions() -> str:
    try:
        import hiredis  # noqa: F401
        parser = "hiredis parser"
    except ImportError:
        parser = "pure-Python parser"
    server = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
    hap = subprocess.run(["haproxy", "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    server_version = re.search(r"v=(\S+)", server).group(1)
    return (f"redis-server {server_version}, "
            f"HAProxy {hap.split()[2]}, redis-py {redis.__version__} ({parser}), "
            f"Python {sys.version.split()[0]}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lat-n", type=int, default=20000)
    ap.add_argument("--client-n", type=int, default=10000)
    ap.add_argument("--tp-n", type=int, default=200000)
    ap.add_argument("--idle", type=int, default=2000)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--pre", type=float, default=2.0)
    ap.add_argument("--post", type=float, default=3.0)
    ap.add_argument("--faults", default="planned,kill9")
    ap.add_argument("--restart-after", type=float, default=None, metavar="S",
                    help="kill9: restart the killed node (empty, as a supervisor would) S seconds "
                         "after all sentinels report the new primary, and run the writers until "
                         "it is a replica (default: it stays down)")
    ap.add_argument("--out", default=str(TARGET / "bench-proxy" / "report.md"))
    ap.add_argument("--json", default=str(TARGET / "bench-proxy" / "results.json"))
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    ap.add_argument("--command", default="bench/proxy/run.sh", help="recorded in the report")
    a = ap.parse_args()
    faults = [f for f in a.faults.split(",") if f]
    if any(f not in ("planned", "kill9") for f in faults):
        ap.error("--faults takes planned and/or kill9")

    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    procs = Procs()
    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    ok = False
    try:
        meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                "commit": git("rev-parse", "--short", "HEAD"),
                # What the binaries are built from: the core, the CLI, the testkit.
                "dirty": bool(git("status", "--porcelain", "--", "core", "cli", "tests",
                                  "Cargo.lock")),
                "cores": os.cpu_count(), "load_before": open("/proc/loadavg").read().split()[0],
                "versions": versions()}
        st = steady_state(a, procs, work)
        fo: dict = {}
        for fault in faults:
            fo[fault] = {}
            for path in PATHS + ["inproc"]:
                log(f"failover {fault}: {NAMES[path]}")
                fo[fault][path] = failover(a, procs, work, fault, path)
                r = fo[fault][path]
                log(f"  acked {r['acked']} lost {r['lost']} twice {r['twice']} "
                    f"gap {r['gap_ms']:.0f} ms{'' if r['recovered'] else ' (never resumed)'}")
        meta["load_after"] = open("/proc/loadavg").read().split()[0]
        text = report(a, st, fo, meta)
        for path, body in ((a.out, text), (a.json, json.dumps(
                {"meta": meta, "args": vars(a), "steady": st, "failover": fo}, indent=1))):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(body)
        print(text)
        log(f"report written to {a.out}, figures to {a.json}")
        ok = True
        return 0
    finally:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)
        procs.stop_all()
        if a.keep or not ok:
            log(f"work directory kept: {work}")
        else:
            import shutil
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
