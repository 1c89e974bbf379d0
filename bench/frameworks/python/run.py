"""Frameworks through failovers, on sentinel_recovery's redis-py adapter and on their own
Sentinel support, plus the adapter's cost per command. Prints a table; --out writes it as
markdown with the command that produced it.

    target/py-venv/bin/python bench/frameworks/python/run.py [--frameworks redis-py,redis.asyncio,django,rq,celery]
        [--scenarios kill9,failover] [--modes adapter,own] [--cost-rounds 15] [--out FILE]

Each (framework, mode, scenario) runs on a fresh topology (bench/python/common.py: sr-topology,
1 primary, 2 replicas, 3 sentinels, down-after 1000 ms). Columns:
- acked / lost / lost after promotion: writes (tasks, jobs) the application was told succeeded;
  of those, missing afterwards; of those, acknowledged after a sentinel published
  +failover-state-send-slaveof-noone (what fencing is for);
- twice: ids applied or executed more than once;
- longest gap: longest time between two acknowledgements, across all writers;
- sentinel cmds: commands the sentinels served during the run (INFO stats
  total_commands_processed) minus their own traffic measured before any client started.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "python"))

import redis  # noqa: E402

import frameworks  # noqa: E402
from common import Topology  # noqa: E402  (bench/python/common.py)
from failover_workload import SCENARIOS  # noqa: E402

COLUMNS = [
    ("framework", "framework"), ("mode", "mode"), ("scenario", "fault"), ("acked", "acked"),
    ("failed", "errors seen"), ("lost", "acked lost"), ("lost_after_promotion", "lost after promotion"),
    ("twice", "twice"), ("longest_gap_s", "longest gap s"), ("sentinel_commands", "sentinel cmds"),
]


def command_cost(rounds: int, ops: int) -> Dict[str, Any]:
    """Sequential SET then GET: redis-py on the adapter (Sentinel(url).master_for) against
    redis-py on the same primary directly, in many short interleaved rounds (the order
    alternates) so that load drifting on a shared machine hits both alike; medians over rounds
    of wall time per command and of this process's CPU time per command (the adapter's cost is
    client CPU: the server's work is the same for both)."""
    from sentinel_recovery.redis_py import Sentinel

    with Topology() as topology:
        port = int(topology.info["primary"]["port"])
        clients = {
            "direct": redis.Redis(port=port),
            "adapter": Sentinel(topology.url).master_for(topology.info["service"]),
        }
        samples: Dict[str, Dict[str, List[float]]] = {
            name: {f"{cmd} {kind}": [] for cmd in ("GET", "SET") for kind in ("wall", "cpu")} for name in clients
        }
        for c in clients.values():  # warm-up: connections, parsers, caches
            for _ in range(500):
                c.set("bench:cost", "x")
                c.get("bench:cost")
        for r in range(rounds):
            order = list(clients) if r % 2 == 0 else list(reversed(clients))
            for name in order:
                c = clients[name]
                w0, c0 = time.perf_counter(), time.process_time()
                for _ in range(ops):
                    c.set("bench:cost", "x")
                w1, c1 = time.perf_counter(), time.process_time()
                for _ in range(ops):
                    c.get("bench:cost")
                w2, c2 = time.perf_counter(), time.process_time()
                s = samples[name]
                s["SET wall"].append((w1 - w0) / ops * 1e6)
                s["SET cpu"].append((c1 - c0) / ops * 1e6)
                s["GET wall"].append((w2 - w1) / ops * 1e6)
                s["GET cpu"].append((c2 - c1) / ops * 1e6)
        result: Dict[str, Any] = {"rounds": rounds, "ops_per_round": ops}
        for key in samples["direct"]:
            direct = statistics.median(samples["direct"][key])
            adapter = statistics.median(samples["adapter"][key])
            result[key] = {"direct_us": round(direct, 2), "adapter_us": round(adapter, 2),
                           "overhead_pct": round((adapter / direct - 1) * 100, 1)}
        for c in clients.values():
            c.close()
        return result


def table(rows: List[Dict[str, Any]]) -> str:
    head = "| " + " | ".join(h for _, h in COLUMNS) + " |"
    sep = "|" + "|".join("---" for _ in COLUMNS) + "|"
    lines = [head, sep]
    for row in rows:
        cells = []
        for key, _ in COLUMNS:
            v = row.get(key)
            if key == "failed" and v:
                v = f"{v} ({', '.join(row.get('errors', []))})"
            cells.append("n/a" if v is None else str(v))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(frameworks.FRAMEWORKS))
    parser.add_argument("--scenarios", default=",".join(SCENARIOS))
    parser.add_argument("--modes", default=",".join(frameworks.MODES))
    parser.add_argument("--cost-rounds", type=int, default=300, help="0 skips the cost measurement")
    parser.add_argument("--cost-ops", type=int, default=100)
    parser.add_argument("--out", help="write the results as markdown to this file")
    args = parser.parse_args()
    names = [n for n in args.frameworks.split(",") if n]
    unknown = [n for n in names if n not in frameworks.FRAMEWORKS]
    if unknown:
        parser.error(f"unknown framework(s) {', '.join(unknown)} (known: {', '.join(frameworks.FRAMEWORKS)})")

    load_before = os.getloadavg()
    rows: List[Dict[str, Any]] = []
    workdir = tempfile.mkdtemp(prefix="sr-bench-frameworks-")
    for name in names:
        for scenario in args.scenarios.split(","):
            for mode in args.modes.split(","):
                with Topology() as topology:
                    started = time.monotonic()
                    try:
                        row = frameworks.FRAMEWORKS[name](topology, mode, scenario, workdir)
                    except Exception as e:  # one broken run must not hide the others
                        row = {"framework": name, "mode": mode, "scenario": scenario, "errors": [repr(e)]}
                    row["seconds"] = round(time.monotonic() - started, 1)
                print(json.dumps(row), flush=True)
                rows.append(row)
    cost = command_cost(args.cost_rounds, args.cost_ops) if args.cost_rounds else None
    text = table(rows)
    print(text)
    if cost:
        print(json.dumps(cost))
    if args.out:
        with open(args.out, "w") as f:
            f.write("# Frameworks through failovers (Python)\n\n")
            f.write("```\n" + " ".join(["target/py-venv/bin/python", "bench/frameworks/python/run.py", *sys.argv[1:]]) + "\n```\n\n")
            f.write(f"Machine: {platform.machine()}, {os.cpu_count()} cores, load average before "
                    f"{load_before[0]:.2f}; Python {platform.python_version()}; per-run logs in {workdir} "
                    "(not kept).\n\n")
            f.write(text + "\n")
            if cost:
                f.write("\nCost per command, redis-py on the adapter against redis-py on the primary directly "
                        f"(sequential, {cost['rounds']} interleaved rounds of {cost['ops_per_round']} SETs then "
                        f"{cost['ops_per_round']} GETs each; medians over rounds of µs per command, wall "
                        "time and this process's CPU time):\n\n| command | direct µs | adapter µs | overhead |\n|---|---|---|---|\n")
                for key in ("GET wall", "SET wall", "GET cpu", "SET cpu"):
                    c = cost[key]
                    f.write(f"| {key} | {c['direct_us']} | {c['adapter_us']} | {c['overhead_pct']} % |\n")
            f.write("\n```json\n" + json.dumps({"rows": rows, "cost": cost}, indent=1) + "\n```\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
