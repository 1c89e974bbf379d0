"""Sequential GET latency: where the asyncio Client's extra per-command time goes.

Compares sentinel_recovery's BlockingClient (caller thread waits, GIL released) and asyncio Client
(completion handed to the loop through its eventfd reader) with redis-py sync and asyncio. The
interleaved comparison with every peer is bench/latency/run.py; this is the quick Python-only
check. One command:

    target/py-venv/bin/python bench/python/sequential_latency.py [N]
"""

import asyncio
import sys
import time

import redis
import redis.asyncio as aredis

import sentinel_recovery as sr
from common import Topology

N = int(sys.argv[1]) if len(sys.argv) > 1 else 5000


def timed(label, fn):
    fn()  # warm-up
    start = time.perf_counter()
    fn()
    print(f"{label:40s} {(time.perf_counter() - start) / N * 1e6:7.1f} µs/op", flush=True)


def main() -> None:
    with Topology("--replicas", "0", "--sentinels", "1") as t:
        host, port = t.primary["host"], t.primary["port"]
        with sr.BlockingClient.connect(t.url) as b:
            timed("sentinel_recovery BlockingClient GET", lambda: [b.execute("GET", "k") for _ in range(N)])
        r = redis.Redis(host=host, port=port)
        timed("redis-py sync GET", lambda: [r.get("k") for _ in range(N)])

        async def run() -> None:
            async with sr.Client.connect(t.url) as c:
                async def loop_sr():
                    for _ in range(N):
                        await c.execute("GET", "k")
                await loop_sr()
                s = time.perf_counter()
                await loop_sr()
                print(f"{'sentinel_recovery asyncio Client GET':40s} {(time.perf_counter() - s) / N * 1e6:7.1f} µs/op")
            ar = aredis.Redis(host=host, port=port)

            async def loop_rp():
                for _ in range(N):
                    await ar.get("k")
            await loop_rp()
            s = time.perf_counter()
            await loop_rp()
            print(f"{'redis-py asyncio GET':40s} {(time.perf_counter() - s) / N * 1e6:7.1f} µs/op")
            await ar.aclose()

        asyncio.run(run())


if __name__ == "__main__":
    main()
