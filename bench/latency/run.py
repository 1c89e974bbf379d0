"""Sequential GET latency of every binding beside its best peer, in ONE interleaved run (issue #16).

    make bench-latency                     # installs what it needs, builds, then runs this
    python3 bench/latency/run.py [-n 5000] [--rounds 7] [--warmup 1000] [--json out.json]
                                 [--clients c,hiredis,py-sr-blocking,...]

One topology (`sr-topology up --replicas 0 --sentinels 1`), one key holding a 16-byte value. Our
clients connect through the sentinel URL; the peers (redis-benchmark, hiredis, redis-py, ioredis)
connect straight to the primary. Each client is one long-lived worker process, connected once and
then driven over a pipe: per round it gets "run N WARMUP", does WARMUP untimed GETs and N timed
GETs one at a time, and sends back the total time and the per-op latencies. Long-lived workers so
that a round measures the steady state only (no interpreter start, import, JIT warm-up, discovery
or connect in any round) and every round of every client does the same work; the idle workers
wait on their pipe and use no CPU. redis-benchmark is a process per round (warm-up run first), as
it can only be. Rounds alternate the clients in turn, starting one client later each round, so
every client sees the same machine (2 shared cores here) on average.

Reported per client: the median over rounds of the per-op mean (round time / N), the spread
(min–max over rounds), and p50/p99 of the per-op latencies pooled over all rounds
(redis-benchmark: the median over rounds of its own p50/p99). Per pair: ours / peer as the ratio
of those medians, the median of the per-round ratios (same round, adjacent in time), and the
ratio of the p50s (on a loaded machine the steadiest of the three: a round that coincides with a
burst of other work moves the mean of every op in it, the pooled p50 hardly).

Artifacts are looked up under $CARGO_TARGET_DIR (default target/); nothing is built here: a
missing one stops the run with the command that makes it (all of them: `make bench-latency`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO / "bench" / "python"))
from common import Topology, end_process, percentile  # noqa: E402

TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
BUILD = TARGET / "bench-latency"  # c_loop, hiredis_loop (mk/bench.mk)
PY = Path(os.environ.get("BENCH_PYTHON", TARGET / "py-venv" / "bin" / "python"))
KEY = "key:__rand_int__"  # the key `redis-benchmark -t get` reads when -r is not given
VALUE = "v" * 16

# name, label (the order of the table)
CLIENTS: List[Tuple[str, str]] = [
    ("redis-benchmark", "redis-benchmark -c 1 (ceiling, direct)"),
    ("c", "C sr_client_execute_blocking"),
    ("hiredis", "C hiredis sync (direct)"),
    ("py-sr-blocking", "Python BlockingClient"),
    ("py-redis-sync", "redis-py sync + hiredis (direct)"),
    ("py-sr-asyncio", "Python asyncio Client"),
    ("py-redis-asyncio", "redis.asyncio + hiredis (direct)"),
    ("node-sr", "Node Client"),
    ("node-ioredis", "ioredis (direct)"),
]
LABEL = dict(CLIENTS)
PAIRS = [
    ("c", "redis-benchmark"),
    ("c", "hiredis"),
    ("py-sr-blocking", "py-redis-sync"),
    ("py-sr-asyncio", "py-redis-asyncio"),
    ("node-sr", "node-ioredis"),
]


def missing(what: str, how: str) -> None:
    raise SystemExit(f"run.py: {what} not found.\n  Make it with: {how}\n  (or all at once: make bench-latency)")


def check_artifacts(names: List[str]) -> None:
    if not (TARGET / "debug" / "sr-topology").exists():
        missing(f"{TARGET}/debug/sr-topology", "cargo build -p sentinel-recovery-testkit --bin sr-topology")
    if "redis-benchmark" in names and shutil.which("redis-benchmark") is None:
        missing("redis-benchmark", "apt-get install redis-tools (make deps installs redis-server)")
    if "c" in names and not (BUILD / "c_loop").exists():
        missing(f"{BUILD}/c_loop", "make bench-latency-build (release libsentinel_recovery + gcc)")
    if "hiredis" in names and not (BUILD / "hiredis_loop").exists():
        missing(f"{BUILD}/hiredis_loop", "apt-get install libhiredis-dev && make bench-latency-build")
    if any(n.startswith("py-") for n in names):
        probe = "import sentinel_recovery, redis, hiredis"
        if not PY.exists() or subprocess.run([str(PY), "-c", probe], capture_output=True).returncode != 0:
            missing(f"{PY} with sentinel_recovery, redis and hiredis",
                    "make python-install && target/py-venv/bin/pip install redis hiredis")
    if any(n.startswith("node-") for n in names):
        if shutil.which("node") is None:
            missing("node", "install node >= 18")
        if not list((REPO / "bindings-node").glob("*.node")):
            missing("the Node addon (bindings-node/*.node)", "make node-build")
        if not (REPO / "bench" / "node" / "node_modules" / "ioredis").exists():
            missing("bench/node/node_modules/ioredis", "cd bench/node && npm ci")


def python_binding_profile() -> str:
    """Which cargo profile built the installed _native module: maturin's PEP 517 build (what
    `make python-install` runs) is a release build, and its output stays in target/release."""
    out = subprocess.run([str(PY), "-c", "import sentinel_recovery._native as n; print(n.__file__)"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return "?"
    installed = Path(out.stdout.strip()).read_bytes()
    for profile in ("release", "debug"):
        built = TARGET / profile / "lib_native.so"
        if built.exists() and built.read_bytes() == installed:
            return profile
    return "unknown (matches neither target/release nor target/debug lib_native.so)"


class Worker:
    """A long-lived client process speaking the "run N WARMUP" protocol."""

    def __init__(self, name: str, argv: List[str]) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.meta = self._read(120)
        if not self.meta.get("ready"):
            raise RuntimeError(f"{name}: unexpected first line {self.meta}")

    def _read(self, timeout: float) -> Dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.name} exited (status {self.proc.wait()})")
        return json.loads(line)

    def round(self, n: int, warmup: int) -> Dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"run {n} {warmup}\n")
        self.proc.stdin.flush()
        r = self._read(600)
        lat = r["lat_ns"]
        if len(lat) != n:
            raise RuntimeError(f"{self.name}: {len(lat)} latencies for {n} commands")
        return {"mean_us": r["total_ns"] / n / 1e3, "lat_us": [x / 1e3 for x in lat]}

    def close(self) -> None:
        end_process(self.proc, "quit\n")


class RedisBenchmark:
    """redis-benchmark -c 1 -P 1 -t get -d 16, one process per round (after a warm-up run)."""

    name = "redis-benchmark"

    def __init__(self, host: str, port: int) -> None:
        self.base = ["redis-benchmark", "-h", host, "-p", str(port), "-c", "1", "-P", "1", "-t", "get", "-d", "16", "--csv"]
        version = subprocess.run(["redis-benchmark", "--version"], capture_output=True, text=True).stdout.strip()
        self.meta = {"version": version, "command": " ".join(self.base[:1] + self.base[5:]) + " -n N"}

    def _run(self, n: int) -> Dict[str, str]:
        out = subprocess.run(self.base + ["-n", str(n)], capture_output=True, text=True, check=True).stdout
        lines = [line for line in out.splitlines() if line.startswith('"')]
        header = [h.strip('"') for h in lines[0].split(",")]
        values = [v.strip('"') for v in lines[-1].split(",")]
        return dict(zip(header, values))

    def round(self, n: int, warmup: int) -> Dict[str, Any]:
        if warmup:
            self._run(warmup)
        row = self._run(n)
        return {
            "mean_us": 1e6 / float(row["rps"]),
            "p50_us": float(row["p50_latency_ms"]) * 1e3,
            "p99_us": float(row["p99_latency_ms"]) * 1e3,
        }

    def close(self) -> None:
        pass


def start(name: str, url: str, host: str, port: int) -> Any:
    node = ["node", str(HERE / "node_loop.js")]
    py = [str(PY), str(HERE / "py_worker.py")]
    argv = {
        "c": [str(BUILD / "c_loop"), "--serve", url],
        "hiredis": [str(BUILD / "hiredis_loop"), "--serve", host, str(port)],
        "py-sr-blocking": py + ["sr-blocking", url],
        "py-redis-sync": py + ["redis-sync", host, str(port)],
        "py-sr-asyncio": py + ["sr-asyncio", url],
        "py-redis-asyncio": py + ["redis-asyncio", host, str(port)],
        "node-sr": node + ["sr", url],
        "node-ioredis": node + ["ioredis", host, str(port)],
    }
    if name == "redis-benchmark":
        return RedisBenchmark(host, port)
    return Worker(name, argv[name])


def git_commit() -> str:
    try:
        # The last commit that changed what is measured (bench/ changes don't).
        head = subprocess.run(["git", "-C", str(REPO), "log", "-1", "--format=%h", "--", "core", "ffi-c",
                               "bindings-python", "bindings-node", "Cargo.lock"], capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--", "core", "ffi-c",
                                "bindings-python", "bindings-node"], capture_output=True, text=True).stdout.strip()
        return head + (" (+uncommitted changes in core/bindings)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "?"


def loadavg() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=5000, help="timed GETs per client per round (default 5000)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    ap.add_argument("--warmup", type=int, default=1000, help="untimed GETs before each round (default 1000)")
    ap.add_argument("--clients", default=",".join(n for n, _ in CLIENTS),
                    help="comma-separated subset of: " + ", ".join(n for n, _ in CLIENTS))
    ap.add_argument("--json", help="write the results (every round) to this JSON file")
    args = ap.parse_args()
    names = [n for n, _ in CLIENTS if n in args.clients.split(",")]
    unknown = set(args.clients.split(",")) - set(LABEL)
    if unknown:
        raise SystemExit(f"run.py: unknown clients {sorted(unknown)}")
    check_artifacts(names)

    py_profile = python_binding_profile() if any(n.startswith("py-sr") for n in names) else None
    if py_profile not in (None, "release"):
        print(f"run.py: WARNING: the Python binding in {PY} is not the release build ({py_profile}); "
              "run make python-install", file=sys.stderr)
    load_before = loadavg()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    results: Dict[str, Dict[str, Any]] = {n: {"rounds": []} for n in names}
    with Topology("--replicas", "0", "--sentinels", "1") as topo:
        host, port, url = topo.primary["host"], topo.primary["port"], topo.url
        with socket.create_connection((host, port), timeout=5) as s:  # SET the key (RESP, loopback)
            s.sendall(f"*3\r\n$3\r\nSET\r\n${len(KEY)}\r\n{KEY}\r\n${len(VALUE)}\r\n{VALUE}\r\n".encode())
            assert s.recv(64).startswith(b"+OK"), "SET failed"
        print(f"# topology: primary {host}:{port}, 0 replicas, 1 sentinel; ours via {url}, peers direct to the primary",
              file=sys.stderr)
        workers: Dict[str, Any] = {}
        try:
            for n in names:
                workers[n] = start(n, url, host, port)
                results[n]["meta"] = workers[n].meta
            for r in range(args.rounds):
                order = names[r % len(names):] + names[:r % len(names)]
                for n in order:
                    res = workers[n].round(args.n, args.warmup)
                    results[n]["rounds"].append(res)
                print(f"# round {r + 1}/{args.rounds}: " + ", ".join(
                    f"{n} {results[n]['rounds'][-1]['mean_us']:.1f}" for n in names) + " µs/op", file=sys.stderr)
        finally:
            for w in workers.values():
                w.close()
    load_after = loadavg()

    summary: Dict[str, Dict[str, Any]] = {}
    for n in names:
        rounds = results[n]["rounds"]
        means = [x["mean_us"] for x in rounds]
        s: Dict[str, Any] = {"label": LABEL[n], "median_mean_us": statistics.median(means),
                             "min_mean_us": min(means), "max_mean_us": max(means), "means_us": means}
        if "lat_us" in rounds[0]:
            pooled = [v for x in rounds for v in x["lat_us"]]
            s["p50_us"], s["p99_us"], s["pooled"] = percentile(pooled, 50), percentile(pooled, 99), True
        else:
            s["p50_us"] = statistics.median(x["p50_us"] for x in rounds)
            s["p99_us"] = statistics.median(x["p99_us"] for x in rounds)
            s["pooled"] = False
        summary[n] = s
    pairs = []
    for ours, peer in PAIRS:
        if ours in summary and peer in summary:
            per_round = [a / b for a, b in zip(summary[ours]["means_us"], summary[peer]["means_us"])]
            pairs.append({"ours": ours, "peer": peer,
                          "ratio": summary[ours]["median_mean_us"] / summary[peer]["median_mean_us"],
                          "median_round_ratio": statistics.median(per_round),
                          "p50_ratio": summary[ours]["p50_us"] / summary[peer]["p50_us"]})

    meta = {"started": started, "commit": git_commit(), "n": args.n, "rounds": args.rounds, "warmup": args.warmup,
            "loadavg_before": load_before, "loadavg_after": load_after, "python_workers": str(PY),
            "python_binding_profile": py_profile,
            "node_addon": "bindings-node/*.node, built by `make node-build` (napi build --release)",
            "topology": "sr-topology up --replicas 0 --sentinels 1; ours via the sentinel URL, peers direct"}
    cmd = "python3 bench/latency/run.py " + " ".join(sys.argv[1:])
    print(f"Sequential GET, 16-byte value, one command at a time; {args.rounds} interleaved rounds of "
          f"{args.n} GETs per client (after {args.warmup} warm-up GETs each round); commit {meta['commit']}; "
          f"load average {load_before} before, {load_after} after. Our clients go through the sentinel URL "
          f"(`sr-topology up --replicas 0 --sentinels 1`), the peers straight to the primary.\n")
    print(f"Command: `{cmd.strip()}`\n")
    print("| client | mean µs/op (median of rounds) | min–max of rounds | p50 µs | p99 µs |")
    print("|---|---|---|---|---|")
    for n in names:
        s = summary[n]
        star = "" if s["pooled"] else " ¹"
        print(f"| {s['label']} | {s['median_mean_us']:.1f} | {s['min_mean_us']:.1f}–{s['max_mean_us']:.1f} "
              f"| {s['p50_us']:.0f}{star} | {s['p99_us']:.0f}{star} |")
    print()
    if pairs:
        print("| ours / peer | ratio of mean medians | median of per-round ratios | ratio of p50 |")
        print("|---|---|---|---|")
        for p in pairs:
            print(f"| {LABEL[p['ours']]} / {LABEL[p['peer']]} | {p['ratio']:.2f}× | {p['median_round_ratio']:.2f}× "
                  f"| {p['p50_ratio']:.2f}× |")
        print()
    if "redis-benchmark" in summary:
        print("¹ redis-benchmark: the median over rounds of its own p50/p99 (its histogram), not pooled per-op.")
    if args.json:
        doc = {"meta": meta, "summary": summary, "pairs": pairs,
               "workers": {n: results[n].get("meta") for n in names},
               "rounds": {n: [{k: v for k, v in x.items() if k != "lat_us"} for x in results[n]["rounds"]]
                          for n in names}}
        Path(args.json).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"(JSON: {args.json})", file=sys.stderr)


if __name__ == "__main__":
    main()
