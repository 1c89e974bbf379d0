"""``sentinel_recovery.Proxy``: the core's fencing RESP proxy started in this process, used by plain
redis-py (no Sentinel code, retries off) as if it were one standalone Redis: commands,
MULTI/EXEC, pub/sub, a Unix socket, a planned failover under 4 writer threads that must lose no
acknowledged write and apply none twice, a close that never blocks the event loop, and options
checked by the core."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import time
import uuid

import pytest

import sentinel_recovery as sr
from conftest import async_wait_until, wait_until

redis = pytest.importorskip("redis")
from redis.backoff import NoBackoff  # noqa: E402
from redis.retry import Retry  # noqa: E402

from redis_py_load import Writers, final_read, through_failover  # noqa: E402


def plain_redis(proxy: sr.Proxy, **kwargs: object) -> "redis.Redis":
    """redis-py on the proxy's URL, retries off: every error the proxy gives reaches the caller."""
    kwargs.setdefault("socket_timeout", 10)
    return redis.Redis.from_url(proxy.url, retry=Retry(NoBackoff(), 0), **kwargs)


def test_plain_redis_py_runs_commands_and_transactions_on_the_primary(topology) -> None:
    key = f"py:proxy:basic:{uuid.uuid4().hex}"
    with sr.Proxy(topology.url) as proxy:
        assert proxy.host == "127.0.0.1" and proxy.port and proxy.path is None
        assert proxy.address == f"127.0.0.1:{proxy.port}"
        assert proxy.url == f"redis://127.0.0.1:{proxy.port}"
        assert not proxy.closed
        with plain_redis(proxy) as r:
            assert r.ping() is True
            # The session's upstream is the primary itself, not a replica.
            assert r.execute_command("ROLE")[0] == b"master"
            assert int(r.info("server")["tcp_port"]) == topology.primary_port
            assert r.set(key, "v1") is True
            assert r.get(key) == b"v1"
            assert r.incr(f"{key}:n") == 1
            assert r.hset(f"{key}:h", mapping={"a": "1", "b": "2"}) == 2
            assert r.hgetall(f"{key}:h") == {b"a": b"1", b"b": b"2"}

            pipe = r.pipeline(transaction=True)
            pipe.set(f"{key}:tx", 10).incrby(f"{key}:tx", 5).get(f"{key}:tx")
            assert pipe.execute() == [True, 15, b"15"]

            # WATCH keeps its per-connection meaning: a change by another connection fails EXEC.
            with r.pipeline(transaction=True) as watched, plain_redis(proxy) as other:
                watched.watch(f"{key}:tx")
                assert other.incr(f"{key}:tx") == 16
                watched.multi()
                watched.set(f"{key}:tx", 0)
                with pytest.raises(redis.WatchError):
                    watched.execute()
            assert r.get(f"{key}:tx") == b"16"

            # A plain pipeline passes through pipelined.
            pipe = r.pipeline(transaction=False)
            for i in range(100):
                pipe.rpush(f"{key}:list", i)
            assert pipe.execute() == list(range(1, 101))
            assert r.llen(f"{key}:list") == 100

            # A server error passes through as the server's own.
            with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
                r.incr(f"{key}:list")
        stats = proxy.stats()
        assert stats["sessions_accepted"] >= 2
        assert stats["commands_forwarded"] >= 100
        assert stats["fenced_replies"] == 0 and stats["malformed_requests"] == 0
    assert proxy.closed
    with pytest.raises(sr.ClosedError):
        proxy.stats()
    # Closed means no longer listening.
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5).close()
    proxy.close()  # idempotent


def test_pub_sub_through_the_proxy(topology) -> None:
    channel = f"py:proxy:news:{uuid.uuid4().hex}"
    with sr.Proxy.start(topology.url) as proxy, plain_redis(proxy) as r:
        pubsub = r.pubsub()
        pubsub.subscribe(channel)
        confirmation = pubsub.get_message(timeout=10)
        assert confirmation is not None and confirmation["type"] == "subscribe", confirmation
        assert r.publish(channel, "hello") == 1
        deadline = time.monotonic() + 10
        message = None
        while message is None and time.monotonic() < deadline:
            message = pubsub.get_message(ignore_subscribe_messages=True, timeout=1)
        assert message is not None, "no message through the proxy"
        assert (message["channel"], message["data"]) == (channel.encode(), b"hello")
        pubsub.close()


def test_unix_socket_listener(topology, tmp_path) -> None:
    path = str(tmp_path / "proxy.sock")
    with sr.Proxy(topology.url, listen=f"unix:{path}") as proxy:
        assert (proxy.path, proxy.host, proxy.port) == (path, None, None)
        assert proxy.address == f"unix:{path}"
        assert proxy.url == f"unix://{path}"
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        with plain_redis(proxy) as r:
            assert r.execute_command("ROLE")[0] == b"master"
    assert not os.path.exists(path)


@pytest.mark.parametrize(
    "options, names",
    [
        ({"hold_ms": 0}, "hold_ms"),
        ({"listen": "localhost:1"}, "listen"),
        ({"listen": "10.0.0.1:0"}, "allow_remote"),
        ({"route": "replica"}, "route"),
        ({"unix_mode": "999"}, "unix_mode"),
        ({"max_clients": -1}, "max_clients"),
        ({"command_timeout_ms": "soon"}, "command_timeout_ms"),
        ({"no_such_option": 1}, "no_such_option"),
    ],
)
def test_a_bad_option_raises_config_error_naming_it(options, names: str) -> None:
    with pytest.raises(sr.ConfigError) as raised:
        sr.Proxy("redis+sentinel://127.0.0.1:26379/mymaster", **options)
    assert raised.value.code == "config"
    assert names in str(raised.value), str(raised.value)


def test_a_function_option_is_refused_before_anything_starts() -> None:
    with pytest.raises(TypeError, match="address_map"):
        sr.Proxy("redis+sentinel://127.0.0.1:26379/mymaster", address_map=lambda a: None)


async def test_async_context_manager_closes_without_blocking_the_loop(topology) -> None:
    key = f"py:proxy:aclose:{uuid.uuid4().hex}"
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticking = asyncio.ensure_future(ticker())
    try:
        async with sr.Proxy(topology.url) as proxy:
            reader, writer = await asyncio.open_connection(proxy.host, proxy.port)
            # A reply in flight at close: BLPOP answers (null) after 2 s, and the close lets it
            # reach its client within the grace, so leaving the block takes that long.
            writer.write(f"*3\r\n$5\r\nBLPOP\r\n${len(key)}\r\n{key}\r\n$1\r\n2\r\n".encode())
            await writer.drain()
            await async_wait_until(lambda: proxy.stats()["commands_forwarded"] >= 1, 20, "BLPOP forwarded")
            before_exit = ticks
        during_exit = ticks - before_exit
        assert proxy.closed
        # The loop kept running while the proxy closed on the core's threads.
        assert during_exit >= 20, f"the loop ran {during_exit} ticks while the proxy closed"
        # ... and the close did wait for the reply in flight.
        assert await asyncio.wait_for(reader.read(), 10) == b"*-1\r\n"
        writer.close()
        with pytest.raises(sr.ClosedError):
            proxy.stats()
        await proxy.aclose()  # idempotent, completes at once
    finally:
        ticking.cancel()


@pytest.mark.parametrize("how", ["failover", "kill9"])
def test_a_failover_loses_no_acknowledged_write_through_the_proxy(fresh_topology, how: str) -> None:
    """A planned ``SENTINEL FAILOVER`` and a kill -9 of the primary. Nothing acknowledged after
    the promotion began may be lost; in the planned failover nothing at all (the fence stops
    writes before the old primary is demoted), while a kill -9 may take with it what the dead
    primary had not yet replicated, as with any client."""
    t = fresh_topology()
    key = f"py:proxy:loss:{how}:{uuid.uuid4().hex[:8]}"
    with sr.Proxy(t.url) as proxy, plain_redis(proxy) as r:
        writers = Writers("plain redis-py through the proxy", r, key, threads=4)
        clock, new = through_failover(t, how, [writers])
        assert clock.began is not None
        result = writers.judge(final_read(new, key), clock.began)
        stats = proxy.stats()
        print(f"[proxy {how}] " + json.dumps({**result, "proxy": stats}, sort_keys=True))
        assert result["acked_after_promotion_began"] > 0, result
        assert result["lost_after_promotion_began"] == 0, result
        if how == "failover":
            assert result["lost"] == 0, result
        assert result["applied_twice"] == 0, result
        # The proxy saw the change and moved its sessions to the new primary.
        assert stats["primary_changes"] >= 1, stats
        # The planned failover moves sessions off the demoted primary; a kill -9 breaks their
        # connections, and they reconnect to the new one.
        assert stats["moves" if how == "failover" else "upstream_errors"] >= 1, stats
        wait_until(lambda: int(r.info("server")["tcp_port"]) == new[1], 10, "sessions on the new primary")
