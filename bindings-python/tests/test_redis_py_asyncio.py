"""sentinel_recovery.redis_py.asyncio on real servers: discovery, clients, from_url, no retries by
default, a write during a planned failover goes to the new primary, WATCH across it fails."""

from __future__ import annotations

import asyncio
import uuid

import pytest

redis = pytest.importorskip("redis")

import redis.asyncio  # noqa: E402

from conftest import Topology, async_wait_until  # noqa: E402
from sentinel_recovery.redis_py.asyncio import ConnectionPool, MasterNotFoundError, Sentinel  # noqa: E402


async def test_discover_and_clients(topology: Topology) -> None:
    sentinel = Sentinel(topology.url)
    assert await sentinel.discover_master(topology.service) == ("127.0.0.1", topology.primary_port)
    replicas = {int(r["port"]) for r in topology.info["replicas"]}
    assert {p for _, p in await sentinel.discover_slaves(topology.service)} <= replicas
    r = sentinel.master_for(topology.service, socket_timeout=5, decode_responses=True)
    key = f"py:rpa:{uuid.uuid4().hex}"
    assert await r.set(key, "v") is True
    assert await r.get(key) == "v"
    await r.aclose()

    pool = ConnectionPool.from_url(topology.url, socket_timeout=5)
    r2 = redis.asyncio.Redis(connection_pool=pool)
    assert await r2.get(key) == b"v"
    with pytest.raises(ValueError, match="'other'"):
        await sentinel.discover_master("other")
    with pytest.raises(ValueError, match="port="):
        ConnectionPool.from_url(topology.url, port=1)
    await r2.aclose()


async def test_no_primary_is_master_not_found(refusing_port: int) -> None:
    sentinel = Sentinel(f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster", connection_kwargs={"socket_timeout": 0.3})
    with pytest.raises(MasterNotFoundError):
        await sentinel.discover_master("mymaster")
    r = sentinel.master_for("mymaster")
    with pytest.raises(redis.ConnectionError, match="no usable primary"):
        await r.ping()


async def test_no_retries_by_default(topology: Topology) -> None:
    key = f"py:rpa:retry:{uuid.uuid4().hex}"
    r = Sentinel(topology.url).master_for(topology.service, socket_timeout=5)
    killer = redis.asyncio.Redis(port=topology.primary_port)

    async def kill_when_blocked() -> None:
        async def blocked():
            return [c["id"] for c in await killer.client_list() if c["cmd"] == "blpop"]

        deadline = asyncio.get_running_loop().time() + 10
        while not (ids := await blocked()):
            assert asyncio.get_running_loop().time() < deadline, "the pipeline never blocked"
            await asyncio.sleep(0.02)
        await killer.client_kill_filter(_id=ids[0])

    killing = asyncio.ensure_future(kill_when_blocked())
    pipe = r.pipeline(transaction=False)
    pipe.rpush(key, "once")
    pipe.blpop([key + ":never"], timeout=3)
    with pytest.raises(redis.ConnectionError):
        await pipe.execute()
    await killing
    assert await r.llen(key) == 1
    await killer.aclose()
    await r.aclose()


async def test_planned_failover_fences_sends_and_breaks_watch(fresh_topology) -> None:
    t = fresh_topology()
    old = t.primary_port
    sentinel = Sentinel(t.url)
    core = sentinel._core
    r = sentinel.master_for(t.service, socket_timeout=5)
    single = redis.asyncio.Redis(connection_pool=r.connection_pool, single_connection_client=True)
    await single.set("py:rpa:before", "1")
    pipe = r.pipeline()
    await pipe.watch("py:rpa:watched")
    assert single.connection.port == pipe.connection.port == old

    await asyncio.get_running_loop().run_in_executor(None, t.cmd, "failover")
    await async_wait_until(lambda: not core.is_routable("127.0.0.1", old, True), 30, "fencing of the old primary")
    assert await single.set("py:rpa:during", "2") is True
    answer = await asyncio.get_running_loop().run_in_executor(None, t.cmd, f"wait-primary-not {old} 30000", 40)
    new = answer["port"]
    assert single.connection.port == new != old
    direct = redis.asyncio.Redis(port=new)
    assert await direct.get("py:rpa:during") == b"2"
    await direct.aclose()

    pipe.multi()
    pipe.set("py:rpa:watched", "x")
    with pytest.raises(redis.WatchError):
        await pipe.execute()
    await single.aclose()
    await r.aclose()


@pytest.mark.parametrize("how", ["failover", "pause"])
async def test_a_subscriber_follows_a_failover(fresh_topology, how: str) -> None:
    """A ``PubSub`` awaiting messages on the old primary: at the core's events the pool ends its
    stream, the next ``get_message`` connects through the core and subscribes again, and what is
    published on the new primary arrives. Paused (a stalled VM, a partition), the old primary
    would never end that stream itself."""
    t = fresh_topology()
    old = t.primary_port
    loop = asyncio.get_running_loop()
    r = Sentinel(t.url).master_for(t.service, socket_timeout=5)
    channel = f"py:rpa:sub:{uuid.uuid4().hex[:8]}"
    p = r.pubsub()
    await p.subscribe(channel)
    assert (await p.get_message(timeout=5))["type"] == "subscribe"
    errors: list = []
    received: list = []

    async def read() -> None:
        while not received:
            try:
                m = await p.get_message(ignore_subscribe_messages=True, timeout=0.5)
            except redis.ConnectionError as e:
                errors.append(e)
                continue
            if m is not None:
                received.append(m["data"])

    reader = asyncio.create_task(read())
    try:
        await loop.run_in_executor(None, t.cmd, "failover" if how == "failover" else f"stop {old}")
        answer = await loop.run_in_executor(None, t.cmd, f"wait-primary-not {old} 30000", 40)
        direct = redis.asyncio.Redis(port=answer["port"])
        sent: list = []

        deadline = loop.time() + 30
        while not reader.done():
            assert loop.time() < deadline, "no message published on the new primary reached the subscriber"
            sent.append(f"m{len(sent)}".encode())
            await direct.publish(channel, sent[-1])
            await asyncio.wait([reader], timeout=0.2)
        await direct.aclose()
        assert set(received) <= set(sent), received
        assert all(isinstance(e, redis.ConnectionError) for e in errors), errors
    finally:
        reader.cancel()
        await p.aclose()
        await r.aclose()
        if how == "pause":
            await loop.run_in_executor(None, t.cmd, f"cont {old}")
