"""Host responsiveness: an asyncio probe scheduled every 50 ms while N clients keep issuing
commands and discovery keeps retrying: six sentinel endpoints of which three accept and never
answer, and the primary killed with quorum unreachable (3 sentinels, quorum 4: no failover).
Reports max and p99 probe delay, sentinel_recovery beside redis-py's asyncio Sentinel. One command:

    target/py-venv/bin/python bench/python/responsiveness.py [--seconds 30] [--clients 1,11,64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

from common import Topology, percentile

HERE = Path(__file__).resolve().parent


async def probe(seconds: float) -> List[float]:
    loop = asyncio.get_running_loop()
    delays: List[float] = []
    start = loop.time()
    k = 0
    while loop.time() - start < seconds:
        k += 1
        target = start + k * 0.05
        await asyncio.sleep(max(0.0, target - loop.time()))
        delays.append(loop.time() - target)
    return delays


async def scenario(lib: str, n: int, seconds: float) -> Dict[str, Any]:
    hung = subprocess.Popen([sys.executable, str(HERE / "hung_server.py"), "3", str(seconds + 120)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    hung_ports = json.loads(hung.stdout.readline())
    t = Topology("--sentinels", "3", "--quorum", "4", "--replicas", "1")
    try:
        sentinels = [("127.0.0.1", s["port"]) for s in t.info["sentinels"]] + [("127.0.0.1", p) for p in hung_ports]
        service = t.info["service"]
        stop = asyncio.Event()
        ok = 0
        errors = 0
        if lib == "sentinel_recovery":
            import sentinel_recovery as sr

            url = "redis+sentinel://" + ",".join(f"{h}:{p}" for h, p in sentinels) + f"/{service}"
            clients = [sr.Client.open(url, command_timeout_ms=1000, sentinel_timeout_ms=500) for _ in range(n)]
            ops = [lambda c=c: c.execute("SET", "probe:k", "v") for c in clients]
        else:
            from redis.asyncio.sentinel import Sentinel

            clients = []
            ops = []
            for _ in range(n):
                s = Sentinel(sentinels, socket_timeout=0.5)
                m = s.master_for(service, socket_timeout=0.5)
                clients.append((s, m))
                ops.append(lambda m=m: m.set("probe:k", "v"))

        async def worker(op) -> None:
            nonlocal ok, errors
            while not stop.is_set():
                try:
                    await op()
                    ok += 1
                    await asyncio.sleep(0.01)
                except Exception:
                    errors += 1
                    await asyncio.sleep(0.01)  # the application's retry pause

        workers = [asyncio.ensure_future(worker(op)) for op in ops]
        await asyncio.sleep(2)  # warm up: everyone connected and writing
        ok_before = ok
        t.cmd(f"kill9 {t.primary['port']}")
        delays = await probe(seconds)
        stop.set()
        await asyncio.wait(workers, timeout=10)
        if lib == "sentinel_recovery":
            for c in clients:
                await c.close()
        else:
            for s, m in clients:
                try:
                    await m.aclose()
                except Exception:
                    pass
        return {"lib": lib, "clients": n, "probes": len(delays), "max_ms": max(delays) * 1000,
                "p99_ms": percentile(delays, 99) * 1000, "ok_before_kill": ok_before, "ops_ok": ok, "errors": errors}
    finally:
        t.close()
        hung.stdin.close()
        hung.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", default="1,11,64")
    ap.add_argument("--libs", default="sentinel_recovery,redis-py")
    a = ap.parse_args()
    rows = []
    for n in [int(x) for x in a.clients.split(",")]:
        for lib in a.libs.split(","):
            r = asyncio.run(scenario(lib, n, a.seconds))
            print(json.dumps(r), flush=True)
            rows.append(r)
    print("\n| clients | library | probe max (ms) | probe p99 (ms) | probes | commands ok / errors during outage |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['clients']} | {r['lib']} | {r['max_ms']:.1f} | {r['p99_ms']:.1f} | {r['probes']} | "
              f"{r['ops_ok'] - r['ok_before_kill']} / {r['errors']} |")


if __name__ == "__main__":
    main()
