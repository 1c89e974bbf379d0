"""Failover recovery: 16 writers, kill -9 of the primary, N rounds. Per round: the lag from the
sentinels' `+switch-master` to the first successful write, the whole write gap, the errors the
application saw, and the commands the sentinels received from the kill to the first write after
the switch (INFO stats total_commands_processed, summed over the sentinels),
beside redis-py's asyncio Sentinel with an application retry every 10 ms and a baseline round with
no client at all. One command:

    target/py-venv/bin/python bench/python/recovery.py [--rounds 10] [--libs sentinel_recovery,redis-py,none]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import threading
import time
from typing import Any, Dict, List, Optional

import redis

from common import Topology, percentile

WRITERS = 16


def sentinel_calls(ports: List[int]) -> int:
    """Commands the sentinels have processed (INFO stats total_commands_processed; Redis 7.0
    sentinels have no commandstats section), less our own INFO on each."""
    total = 0
    for p in ports:
        r = redis.Redis(host="127.0.0.1", port=p, socket_timeout=2)
        info = r.info("stats")
        r.close()
        total += int(info["total_commands_processed"])
    return total - len(ports)


class SwitchWatcher:
    """Records when a sentinel publishes +switch-master (its own monotonic clock reading)."""

    def __init__(self, port: int) -> None:
        self.r = redis.Redis(host="127.0.0.1", port=port)
        self.ps = self.r.pubsub()
        self.ps.subscribe("+switch-master")
        self.at: Optional[float] = None
        self._stop = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop:
            m = self.ps.get_message(timeout=0.05)
            if m and m["type"] == "message" and self.at is None:
                self.at = time.monotonic()

    def close(self) -> None:
        self._stop = True


async def round_(t: Topology, lib: str, state: Dict[str, Any]) -> Dict[str, Any]:
    sentinel_ports = [s["port"] for s in t.info["sentinels"]]
    primary = t.cmd("primary")
    old_port = primary["port"]
    watcher = SwitchWatcher(sentinel_ports[0])
    successes: List[float] = []
    errors = 0
    stop = asyncio.Event()
    op = state.get("op")

    async def writer() -> None:
        nonlocal errors
        while not stop.is_set():
            try:
                await op()
                successes.append(time.monotonic())
            except Exception:
                errors += 1
                await asyncio.sleep(0.01)  # application retry pause

    workers = [asyncio.ensure_future(writer()) for _ in range(WRITERS)] if op else []
    await asyncio.sleep(1.0)
    errors_before = errors
    calls_before = sentinel_calls(sentinel_ports)
    kill_at = time.monotonic()
    t.cmd(f"kill9 {old_port}")
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, t.cmd, f"wait-primary-not {old_port} 30000", 40)
    deadline = time.monotonic() + 30
    while watcher.at is None and time.monotonic() < deadline:
        await asyncio.sleep(0.005)
    switch_at = watcher.at
    first_after: Optional[float] = None
    while op and time.monotonic() < deadline:
        after = [s for s in successes if switch_at and s >= switch_at]
        if after:
            first_after = min(after)
            break
        await asyncio.sleep(0.005)
    if not op:
        await asyncio.sleep(max(0.0, (switch_at or 0) + 0.01 - time.monotonic()))  # same window, no client
    calls_window_end = time.monotonic()
    calls_after = sentinel_calls(sentinel_ports)
    stop.set()
    if workers:
        await asyncio.wait(workers, timeout=10)
    watcher.close()
    last_before = max([s for s in successes if s <= kill_at], default=None)
    # bring the old primary back as a replica for the next round
    await loop.run_in_executor(None, t.cmd, f"restart {old_port}", 40)
    await asyncio.sleep(1.5)
    return {
        "lag_ms": (first_after - switch_at) * 1000 if first_after and switch_at else None,
        "gap_ms": (first_after - last_before) * 1000 if first_after and last_before else None,
        "errors": errors - errors_before,
        "sentinel_cmds": calls_after - calls_before,
        "window_ms": (calls_window_end - kill_at) * 1000,
    }


async def run(lib: str, rounds: int) -> List[Dict[str, Any]]:
    t = Topology("--sentinels", "3", "--quorum", "2", "--replicas", "2")
    state: Dict[str, Any] = {}
    try:
        if lib == "sentinel_recovery":
            import sentinel_recovery as sr

            client = await sr.Client.connect(t.url, command_timeout_ms=5000)
            state["op"] = lambda: client.execute("INCR", "bench:recovery")
        elif lib == "redis-py":
            from redis.asyncio.sentinel import Sentinel

            s = Sentinel([("127.0.0.1", x["port"]) for x in t.info["sentinels"]], socket_timeout=0.5)
            m = s.master_for(t.info["service"], socket_timeout=0.5)
            state["op"] = lambda: m.incr("bench:recovery")
        out = []
        for i in range(rounds):
            r = await round_(t, lib, state)
            r["round"] = i + 1
            print(lib, json.dumps(r), flush=True)
            out.append(r)
        if lib == "sentinel_recovery":
            await client.close()
        return out
    finally:
        t.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--libs", default="none,sentinel_recovery,redis-py")
    a = ap.parse_args()
    summary = {}
    baseline_rate = None  # sentinel commands per ms with no client, from the "none" rounds
    for lib in a.libs.split(","):
        rows = asyncio.run(run(lib, a.rounds))
        if lib == "none":
            baseline_rate = sum(r["sentinel_cmds"] for r in rows) / sum(r["window_ms"] for r in rows)
        extra = [r["sentinel_cmds"] - baseline_rate * r["window_ms"] for r in rows] if baseline_rate else []
        lags = [r["lag_ms"] for r in rows if r["lag_ms"] is not None]
        gaps = [r["gap_ms"] for r in rows if r["gap_ms"] is not None]
        summary[lib] = {
            "rounds": len(rows),
            "lag_median_ms": statistics.median(lags) if lags else None,
            "lag_max_ms": max(lags) if lags else None,
            "gap_median_ms": statistics.median(gaps) if gaps else None,
            "errors_median": statistics.median([r["errors"] for r in rows]),
            "errors_max": max(r["errors"] for r in rows),
            "sentinel_cmds_median": statistics.median([r["sentinel_cmds"] for r in rows]),
            "extra_median": statistics.median(extra) if extra else None,
        }
    print("\n| client | rounds | lag median (ms) | lag max (ms) | write gap median (ms) | app errors median / max "
          "| sentinel cmds in window (median) | beyond no-client baseline (median) |")
    print("|---|---|---|---|---|---|---|---|")
    f = lambda v: "n/a" if v is None else f"{v:.1f}"
    for lib, s in summary.items():
        print(f"| {lib} | {s['rounds']} | {f(s['lag_median_ms'])} | {f(s['lag_max_ms'])} | {f(s['gap_median_ms'])} | "
              f"{s['errors_median']} / {s['errors_max']} | {s['sentinel_cmds_median']} | {f(s['extra_median'])} |")
    if baseline_rate:
        print(f"\nno-client baseline: {baseline_rate * 1000:.1f} sentinel commands/s (3 sentinels together)")

if __name__ == "__main__":
    main()
