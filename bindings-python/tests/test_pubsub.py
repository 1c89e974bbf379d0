"""Pub/sub for applications: a subscription follows a kill -9 failover (subscription_lost, then
subscription_restored), what the gap loses is counted; iterators, changes and close."""

from __future__ import annotations

import asyncio
import threading
from typing import List

import pytest

import sentinel_recovery as sr
from conftest import async_wait_until, wait_until

FAILOVER = 90.0


async def test_messages_before_and_after_a_kill9_failover(fresh_topology) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    async with sr.Client.connect(t.url, command_timeout_ms=10000) as client:
        events: List[dict] = []
        stream = client.events()

        async def collect() -> None:
            async for e in stream:
                events.append(e)

        collector = asyncio.ensure_future(collect())
        sub = await client.subscribe("news", patterns=("alerts.*",))
        assert sub.channels == [b"news"] and sub.patterns == [b"alerts.*"]

        attempted = 0
        acknowledged = 0
        stop = asyncio.Event()

        async def publish() -> None:
            nonlocal attempted, acknowledged
            while not stop.is_set():
                n = attempted
                attempted += 1
                try:
                    await client.execute("PUBLISH", "news", n)
                    acknowledged += 1
                except (sr.TimeoutError, sr.ConnectionLostError):
                    pass  # may or may not have been published: counted as attempted
                await asyncio.sleep(0.005)

        received: List[int] = []
        alerts: List[sr.Message] = []

        async def consume() -> None:
            async for m in sub:
                if m.pattern is None:
                    assert m.channel == b"news"
                    received.append(int(m.data))
                else:
                    alerts.append(m)

        publisher = asyncio.ensure_future(publish())
        consumer = asyncio.ensure_future(consume())
        await async_wait_until(lambda: len(received) >= 20, 20, "messages before the kill")

        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, t.cmd, f"kill9 {old_port}")
        kinds = lambda: [e["kind"] for e in events]  # noqa: E731
        await async_wait_until(lambda: "subscription_restored" in kinds(), FAILOVER, "subscription_restored")
        after_restore = attempted
        await async_wait_until(
            lambda: sum(1 for n in received if n >= after_restore) >= 20, 30, "messages after the restore"
        )
        stop.set()
        await publisher

        lost = next(e for e in events if e["kind"] == "subscription_lost")
        restored = next(e for e in events if e["kind"] == "subscription_restored")
        assert kinds().index("subscription_lost") < kinds().index("subscription_restored")
        assert lost["address"]["port"] == old_port
        assert restored["address"]["port"] != old_port
        assert restored["gap_ms"] > 0
        assert client.topology()["primary"] == restored["address"]

        # The pattern was re-subscribed too.
        await client.execute("PUBLISH", "alerts.disk", "full")
        await async_wait_until(lambda: alerts, 10, "a pattern message")
        assert alerts[0] == sr.Message(b"alerts.disk", b"full", b"alerts.*")

        assert received == sorted(set(received)), "in order, each once"
        assert all(n < attempted for n in received)
        print(
            f"pub/sub across kill -9: {attempted} published ({acknowledged} acknowledged), "
            f"{len(received)} received, {attempted - len(received)} lost in a gap of "
            f"{restored['gap_ms']} ms, {sub.dropped} dropped by the buffer"
        )
        assert sub.dropped == 0
        await sub.unsubscribe()  # no names: ends the subscription
        await asyncio.wait_for(consumer, 10)  # the iteration ended
        assert sub.closed
        collector.cancel()


def test_blocking_iteration_changes_and_close(topology) -> None:
    with sr.BlockingClient.connect(topology.url, decode_responses=True) as client:
        sub = client.subscribe("py:a")
        got: List[sr.Message] = []
        ended = threading.Event()

        def consume() -> None:
            for m in sub:
                got.append(m)
            ended.set()

        reader = threading.Thread(target=consume)
        reader.start()
        client.execute("PUBLISH", "py:a", "1")
        wait_until(lambda: got, 10, "the first message")
        assert got[0] == sr.Message("py:a", "1", None)

        sub.psubscribe("py:p.*")
        sub.unsubscribe("py:a")
        assert sub.channels == [] and sub.patterns == ["py:p.*"]
        assert client.execute("PUBLISH", "py:a", "2") == 0, "nobody listens to py:a any more"
        client.execute("PUBLISH", "py:p.x", "3")
        wait_until(lambda: len(got) >= 2, 10, "the pattern message")
        assert got[1] == sr.Message("py:p.x", "3", "py:p.*")

        # Closing the client ends the subscription and the thread's iteration.
    assert ended.wait(10)
    reader.join()
    assert sub.closed
    assert len(got) == 2


async def test_a_subscription_needs_a_name(topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        with pytest.raises(sr.ConfigError):
            await client.subscribe()
        with pytest.raises(TypeError):
            await client.subscribe(1)  # type: ignore[arg-type]
