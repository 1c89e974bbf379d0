"""Worker of run.py: one Python client, kept alive for the whole run, driven over stdin/stdout.

    python py_worker.py sr-blocking URL | redis-sync HOST PORT | sr-asyncio URL | redis-asyncio HOST PORT

Prints one JSON line when connected ({"ready": true, ...}), then for each stdin line
"run N WARMUP" does WARMUP untimed GETs and N timed ones (one at a time) and prints
{"total_ns": T, "lat_ns": [...]}; "quit" or EOF closes the client and exits. Every kind does the
same per-round work: the same loop, one perf_counter_ns pair around each command.
"""

from __future__ import annotations

import asyncio
import json
import sys
from time import perf_counter_ns
from typing import Any, Awaitable, Callable, Dict, List

KEY = "key:__rand_int__"


def reply(obj: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def commands():
    for line in sys.stdin:
        parts = line.split()
        if len(parts) != 3 or parts[0] != "run":
            return
        yield int(parts[1]), int(parts[2])


def redis_meta(use_asyncio: bool) -> Dict[str, Any]:
    """redis-py's version and its parser, which must be the hiredis one."""
    import hiredis
    import redis
    import redis.asyncio.connection
    import redis.connection
    from redis.utils import HIREDIS_AVAILABLE

    if not HIREDIS_AVAILABLE:
        raise SystemExit("py_worker: redis-py does not see hiredis in this interpreter; the peer must use it")
    return {"redis_py": redis.__version__, "hiredis": hiredis.__version__,
            "parser": (redis.asyncio.connection if use_asyncio else redis.connection).DefaultParser.__name__}


def sync_main(get: Callable[[], Any], meta: Dict[str, Any]) -> None:
    reply({"ready": True, **meta})
    for n, warmup in commands():
        for _ in range(warmup):
            get()
        lat: List[int] = [0] * n
        t0 = perf_counter_ns()
        for i in range(n):
            s = perf_counter_ns()
            get()
            lat[i] = perf_counter_ns() - s
        reply({"total_ns": perf_counter_ns() - t0, "lat_ns": lat})


def async_main(loop: asyncio.AbstractEventLoop, get: Callable[[], Awaitable[Any]], meta: Dict[str, Any]) -> None:
    async def one_round(n: int, warmup: int) -> Dict[str, Any]:
        for _ in range(warmup):
            await get()
        lat: List[int] = [0] * n
        t0 = perf_counter_ns()
        for i in range(n):
            s = perf_counter_ns()
            await get()
            lat[i] = perf_counter_ns() - s
        return {"total_ns": perf_counter_ns() - t0, "lat_ns": lat}

    reply({"ready": True, **meta})
    # The loop runs only during a round; between rounds this process waits on stdin.
    for n, warmup in commands():
        reply(loop.run_until_complete(one_round(n, warmup)))


def main() -> None:
    kind = sys.argv[1]
    if kind == "sr-blocking":
        import sentinel_recovery as sr

        b = sr.BlockingClient.connect(sys.argv[2])
        try:
            sync_main(lambda: b.execute("GET", KEY), {"module": sr.__file__})
        finally:
            b.close()
    elif kind == "redis-sync":
        import redis

        r = redis.Redis(host=sys.argv[2], port=int(sys.argv[3]))
        r.ping()
        sync_main(lambda: r.get(KEY), redis_meta(False))
        r.close()
    elif kind == "sr-asyncio":
        import sentinel_recovery as sr

        loop = asyncio.new_event_loop()
        c = loop.run_until_complete(sr.Client.connect(sys.argv[2]))
        try:
            async_main(loop, lambda: c.execute("GET", KEY), {"module": sr.__file__})
        finally:
            loop.run_until_complete(c.close())
            loop.close()
    elif kind == "redis-asyncio":
        import redis.asyncio as aredis

        meta = redis_meta(True)
        loop = asyncio.new_event_loop()
        r = aredis.Redis(host=sys.argv[2], port=int(sys.argv[3]))
        loop.run_until_complete(r.ping())
        try:
            async_main(loop, lambda: r.get(KEY), meta)
        finally:
            loop.run_until_complete(r.aclose())
            loop.close()
    else:
        raise SystemExit(f"py_worker: unknown kind {kind!r}")


if __name__ == "__main__":
    main()
