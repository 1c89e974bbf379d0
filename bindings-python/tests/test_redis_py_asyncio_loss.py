"""Acknowledged writes through a failover on ``redis.asyncio``: 8 tasks RPUSH unique ids through
the asyncio adapter and 8 through redis-py's own asyncio Sentinel, on one event loop (in a thread
of its own, so the shared harness can drive the failover), through a planned SENTINEL FAILOVER
and a kill -9 of the primary. The adapter must lose nothing it acknowledged after the promotion
began and apply nothing twice; redis-py's numbers are printed, not asserted."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from typing import Any, Callable, List

import pytest

redis = pytest.importorskip("redis")

import redis.asyncio as aioredis  # noqa: E402
from redis_py_load import Writers, final_read, through_failover  # noqa: E402
from sentinel_recovery.redis_py.asyncio import Sentinel  # noqa: E402


class AsyncWriters(Writers):
    """`Writers` whose writers are tasks on `loop` (running in another thread), each awaiting
    `make_client()`'s RPUSHes one at a time."""

    def __init__(self, name: str, loop: asyncio.AbstractEventLoop, make_client: Callable[[], Any], key: str) -> None:
        super().__init__(name, key=key, threads=0)
        self._loop = loop
        self._make_client = make_client
        self._done: "asyncio.Future[Any] | None" = None
        self._client: Any = None

    def start(self) -> "AsyncWriters":
        self._done = asyncio.run_coroutine_threadsafe(self._main(), self._loop)
        return self

    async def _main(self) -> None:
        self._client = self._make_client()
        try:
            await asyncio.gather(*(self._task(i) for i in range(8)))
        finally:
            await self._client.aclose()

    async def _task(self, index: int) -> None:
        n = 0
        while not self._stop.is_set():
            item = f"{index}-{n}"
            n += 1
            try:
                await self._client.rpush(self.key, item)
            except self._errors as e:
                with self._lock:
                    self.errors[type(e).__name__] += 1
                await asyncio.sleep(0.01)
                continue
            with self._lock:
                self.acked.append((item, time.monotonic()))
            await asyncio.sleep(0.002)

    def stop(self) -> None:
        self._stop.set()
        assert self._done is not None
        self._done.result(30)


@pytest.fixture
def loop():
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.mark.parametrize("how", ["failover", "kill9"])
def test_no_acknowledged_write_lost_after_the_promotion_began(fresh_topology, loop, how: str) -> None:
    t = fresh_topology()
    run = uuid.uuid4().hex[:8]
    sentinels = [(s["host"], int(s["port"])) for s in t.info["sentinels"]]
    adapter = AsyncWriters(
        "asyncio adapter",
        loop,
        lambda: Sentinel(t.url).master_for(t.service, socket_timeout=5),
        f"py:aloss:{run}:adapter",
    )
    own = AsyncWriters(
        "redis.asyncio Sentinel",
        loop,
        lambda: aioredis.sentinel.Sentinel(sentinels, socket_timeout=1.0).master_for(t.service, socket_timeout=1.0),
        f"py:aloss:{run}:redis-py",
    )
    clock, new = through_failover(t, how, [adapter, own])
    assert clock.began is not None
    results: List[dict] = [w.judge(final_read(new, w.key), clock.began) for w in (adapter, own)]
    for r in results:
        print(f"[asyncio {how}] " + json.dumps(r, sort_keys=True))
    mine = results[0]
    assert mine["acked_after_promotion_began"] > 0
    assert mine["lost_after_promotion_began"] == 0, mine
    assert mine["applied_twice"] == 0, mine
