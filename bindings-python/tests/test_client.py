"""Commands, replies, topology, context managers and close, asyncio and blocking."""

from __future__ import annotations

import asyncio
import sys
import time
import typing
import uuid

import pytest

import sentinel_recovery as sr
from conftest import Topology


async def test_replies_are_bytes_by_default(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        assert await client.execute("SET", "py:k", b"v\xff") == b"OK"
        assert await client.execute("GET", "py:k") == b"v\xff"
        assert await client.execute("GET", "py:missing") is None
        await client.execute("DEL", "py:n")
        assert await client.execute("INCRBY", "py:n", 5) == 5
        assert await client.execute("INCRBYFLOAT", "py:n", 1.5) in (b"6.5", 6.5)
        await client.execute("DEL", "py:h", "py:s", "py:l")
        await client.execute("HSET", "py:h", "a", "1", "b", "2")
        assert await client.execute("HGETALL", "py:h") == {b"a": b"1", b"b": b"2"}
        await client.execute("SADD", "py:s", "x", "y")
        assert set(await client.execute("SMEMBERS", "py:s")) == {b"x", b"y"}
        await client.execute("RPUSH", "py:l", "1", "2", "3")
        assert await client.execute("LRANGE", "py:l", 0, -1) == [b"1", b"2", b"3"]
        assert await client.execute("EXISTS", "py:h") == 1


async def test_decode_responses_gives_str(topology: Topology) -> None:
    async with sr.Client.connect(topology.url, decode_responses=True) as client:
        await client.execute("SET", "py:d", "héllo")
        assert await client.execute("GET", "py:d") == "héllo"
        assert await client.execute("PING") == "PONG"
        # Invalid UTF-8 stays bytes instead of failing the reply.
        await client.execute("SET", "py:raw", b"\xff\xfe")
        assert await client.execute("GET", "py:raw") == b"\xff\xfe"


def test_blocking_client_and_args(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url, decode_responses=True) as client:
        assert client.execute("SET", "py:b", bytearray(b"ab")) == "OK"
        assert client.execute("APPEND", "py:b", memoryview(b"cd")) == 4
        assert client.execute("GET", "py:b") == "abcd"
        for bad in (None, True, object(), ["x"]):
            with pytest.raises(TypeError):
                client.execute("SET", "py:b", bad)
        assert client.execute("GET", "py:b") == "abcd"


async def test_topology_snapshot(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        t = client.topology()
        assert set(t) == set(typing.get_type_hints(sr.Topology))
        assert set(t) == {"service", "primary", "replicas", "sentinels", "epoch", "healthy"}
        assert t["service"] == topology.service
        assert t["primary"] == {"host": "127.0.0.1", "port": topology.primary_port}
        assert t["healthy"] is True
        assert {r["port"] for r in t["replicas"]} == {r["port"] for r in topology.info["replicas"]}
        assert len(t["sentinels"]) == len(topology.info["sentinels"])
        assert all(set(s) == {"host", "port", "up", "tilt", "knows_service"} for s in t["sentinels"])
        assert all(set(s) == sr.SentinelInfo.__required_keys__ for s in t["sentinels"])
        assert set(t["primary"]) == sr.Address.__required_keys__  # `announced` only when mapped


async def test_open_returns_at_once_and_ready_waits(topology: Topology) -> None:
    client = sr.Client.open(topology.url)
    try:
        t = await client.ready()
        assert t["primary"]["port"] == topology.primary_port
        assert await client.execute("PING") == b"PONG"
    finally:
        await client.close()


async def test_context_managers_close(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        assert not client.closed
        assert "redis+sentinel://" in repr(client)
    assert client.closed
    with pytest.raises(sr.ClosedError):
        await client.execute("PING")
    await client.close()  # idempotent

    plain = await sr.Client.connect(topology.url)
    async with plain:
        pass
    assert plain.closed

    with sr.BlockingClient.connect(topology.url) as blocking:
        assert blocking.execute("PING") == b"PONG"
    assert blocking.closed
    with pytest.raises(sr.ClosedError):
        blocking.execute("PING")
    with pytest.raises(sr.ClosedError):
        blocking.topology()
    blocking.close()


async def test_event_iterators_end_on_close(topology: Topology) -> None:
    client = await sr.Client.connect(topology.url)
    events = client.events()

    async def drain() -> list:
        return [e async for e in events]

    task = asyncio.ensure_future(drain())
    await asyncio.sleep(0)
    await client.close()
    assert isinstance(await asyncio.wait_for(task, 10), list)  # the iteration ended

    blocking = sr.BlockingClient.connect(topology.url)
    it = blocking.events()
    assert it.next(timeout=0.05) is None  # nothing happened: times out
    blocking.close()
    with pytest.raises(StopIteration):
        it.next(timeout=5)


async def test_cancelled_command_leaves_client_usable(topology: Topology) -> None:
    seen = []
    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(u)
    try:
        async with sr.Client.connect(topology.url) as client:
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(client.execute("BLPOP", "py:never", 1), 0.05)
            assert await client.execute("PING") == b"PONG"
            await asyncio.sleep(1.2)  # let the cancelled BLPOP time out on the server; nothing may reach the cancelled future
            assert await client.execute("PING") == b"PONG"
    finally:
        sys.unraisablehook = old
    assert seen == []


async def test_cancelling_the_awaiting_task_cancels_the_command(topology: Topology) -> None:
    key = f"py:cancel:{uuid.uuid4().hex}"

    async def blpops(client: sr.Client) -> int:
        return (await client.execute("CLIENT", "LIST")).count(b"cmd=blpop")

    async with sr.Client.connect(topology.url) as client:
        before = await blpops(client)
        task = asyncio.ensure_future(client.execute("BLPOP", key, 0))
        await async_wait_until_async(lambda: blpops(client), lambda n: n > before, 15, "BLPOP blocked on the server")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The core dropped the command: it does not stay blocked and swallow the next value.
        await async_wait_until_async(lambda: blpops(client), lambda n: n <= before, 5, "BLPOP gone from the server")
        await client.execute("LPUSH", key, "kept")
        await asyncio.sleep(0.2)
        assert await client.execute("LLEN", key) == 1
        await client.execute("DEL", key)


async def async_wait_until_async(probe, ok, timeout: float, what: str) -> None:
    """Polls the coroutine function `probe` until `ok(result)`; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ok(await probe()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def test_many_concurrent_commands_complete(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        await client.execute("DEL", "py:c")
        replies = await asyncio.wait_for(
            asyncio.gather(*(client.execute("INCR", "py:c") for _ in range(2000))), 30
        )
        assert sorted(replies) == list(range(1, 2001))


def test_worker_threads_cannot_change_while_running(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url):
        with pytest.raises(sr.ConfigError):
            sr.set_worker_threads(3)
