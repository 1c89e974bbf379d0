"""Throughput: GET and SET of 100-byte values, sequential and 64 concurrent, on one primary.

sentinel_recovery (asyncio Client through Sentinel) beside redis-py asyncio with hiredis and
valkey-glide (both connected straight to the primary: glide has no Sentinel support), with
`redis-benchmark` on the same server as the ceiling. One command:

    target/py-venv/bin/python bench/python/throughput.py [--ops N] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import subprocess
import time
from typing import Any, Awaitable, Callable, Dict

from common import Topology

VALUE = b"x" * 100
CONCURRENCY = 64


async def measure(op: Callable[[int], Awaitable[Any]], ops: int, concurrency: int) -> float:
    """ops/s for `ops` calls of `op`, with `concurrency` tasks each running its share in a loop."""
    per_task = ops // concurrency

    async def worker(w: int) -> None:
        for i in range(per_task):
            await op(w * per_task + i)

    # warm-up
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    start = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(concurrency)))
    return per_task * concurrency / (time.perf_counter() - start)


async def bench_client(name: str, get: Callable, set_: Callable, ops: int, results: Dict[str, Dict[str, float]]) -> None:
    row: Dict[str, float] = {}
    for mode, conc in (("sequential", 1), ("concurrent64", CONCURRENCY)):
        n = ops // 10 if conc == 1 else ops
        row[f"SET {mode}"] = await measure(lambda i: set_(f"bench:{i % 1000}", VALUE), n, conc)
        row[f"GET {mode}"] = await measure(lambda i: get(f"bench:{i % 1000}"), n, conc)
    results[name] = row
    print(name, {k: round(v) for k, v in row.items()}, flush=True)


async def run(topology: Topology, ops: int) -> Dict[str, Dict[str, float]]:
    results: Dict[str, Dict[str, float]] = {}
    host, port = topology.primary["host"], topology.primary["port"]

    import sentinel_recovery as sr

    async with sr.Client.connect(topology.url) as c:
        await bench_client("sentinel_recovery (asyncio Client, via Sentinel)", lambda k: c.execute("GET", k),
                           lambda k, v: c.execute("SET", k, v), ops, results)

    import redis.asyncio as aioredis
    from redis.utils import HIREDIS_AVAILABLE

    r = aioredis.Redis(host=host, port=port, max_connections=CONCURRENCY)
    name = f"redis-py {__import__('redis').__version__} asyncio{' + hiredis' if HIREDIS_AVAILABLE else ''} (direct)"
    await bench_client(name, r.get, r.set, ops, results)
    await r.aclose()

    try:
        from glide import GlideClient, GlideClientConfiguration, NodeAddress

        g = await GlideClient.create(GlideClientConfiguration([NodeAddress(host, port)]))
        await bench_client("valkey-glide (asyncio, direct)", g.get, g.set, ops, results)
        await g.close()
    except Exception as e:  # reported, not hidden
        print("valkey-glide failed:", repr(e), flush=True)

    rb: Dict[str, float] = {}
    for conc, mode in ((1, "sequential"), (CONCURRENCY, "concurrent64")):
        n = ops // 10 if conc == 1 else ops * 2
        out = subprocess.run(["redis-benchmark", "-h", host, "-p", str(port), "-t", "set,get", "-d", "100",
                              "-n", str(n), "-c", str(conc), "-r", "1000", "--csv"],
                             capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            cells = [c.strip('"') for c in line.split(",")]
            if cells[0] in ("SET", "GET"):
                rb[f"{cells[0]} {mode}"] = float(cells[1])
    results["redis-benchmark (ceiling)"] = rb
    print("redis-benchmark", {k: round(v) for k, v in rb.items()}, flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ops", type=int, default=64_000, help="operations per concurrent measurement")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with Topology("--replicas", "0", "--sentinels", "3") as t:
        results = asyncio.run(run(t, a.ops))
    cols = ["SET sequential", "GET sequential", "SET concurrent64", "GET concurrent64"]
    print(f"\nmachine: {platform.machine()}, 2 cores, Python {platform.python_version()}")
    print("| client | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, row in results.items():
        print(f"| {name} | " + " | ".join(f"{row.get(c, float('nan')):,.0f}" for c in cols) + " |")
    if a.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
