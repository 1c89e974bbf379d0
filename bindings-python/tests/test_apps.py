"""What applications use: pipelines, transactions (WATCH, refused after a failover), per-call
deadlines, cancellation, hints naming the Python API, and log records without secrets."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

import sentinel_recovery as sr
from conftest import Topology, async_wait_until, wait_until


async def test_pipeline_gives_each_reply_or_error_in_order(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        results = await client.pipeline(
            [["SET", "py:p", "1"], ["INCR", "py:p"], ["HGET", "py:p", "f"], ["GET", "py:p"]]
        )
        assert results[0] == "OK" or results[0] == b"OK"
        assert results[1] == 2
        assert isinstance(results[2], sr.ServerError) and results[2].server_code == "WRONGTYPE"
        assert results[3] == b"2"
        assert await client.pipeline([]) == []
        # A command a pipeline can't carry: the whole pipeline is refused, nothing sent.
        with pytest.raises(sr.ConfigError):
            await client.pipeline([["INCR", "py:p"], ["BLPOP", "py:l", "1"]])
        assert await client.execute("GET", "py:p") == b"2"


def test_blocking_pipeline(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url, decode_responses=True) as client:
        results = client.pipeline([("SET", "py:bp", "a"), ("APPEND", "py:bp", "b"), ("LPUSH", "py:bp", "x")])
        assert results[:2] == ["OK", 2]
        assert isinstance(results[2], sr.ServerError)


async def test_per_call_deadlines(topology: Topology) -> None:
    async with sr.Client.connect(topology.url, command_timeout_ms=10000) as client:
        # A command held by CLIENT PAUSE WRITE misses a short deadline. Pauses stay short of the
        # sentinels' down-after (1000 ms): their PUBLISH waits behind them too.
        await client.execute("CLIENT", "PAUSE", "500", "WRITE")
        with pytest.raises(sr.TimeoutError):
            await client.execute("SET", "py:paused", "1", timeout=0.1)
        # A pipeline's deadline covers all of it: a SET behind a CLIENT PAUSE WRITE misses it.
        with pytest.raises(sr.TimeoutError):
            await client.pipeline([["CLIENT", "PAUSE", "500", "WRITE"], ["SET", "py:paused", "2"]], timeout=0.1)
        await client.execute("CLIENT", "UNPAUSE", timeout=20)
    with sr.BlockingClient.connect(topology.url) as bclient:
        with pytest.raises(sr.TimeoutError):
            bclient.pipeline([["CLIENT", "PAUSE", "500", "WRITE"], ["SET", "py:paused", "2"]], timeout=0.1)
        bclient.execute("CLIENT", "UNPAUSE", timeout=20)


async def test_cancelling_the_task_cancels_the_command_and_it_is_not_retried(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        await client.execute("DEL", "py:cancel")
        task = asyncio.ensure_future(client.execute("BLPOP", "py:cancel", 0))

        async def blocked() -> int:
            clients = await client.execute("CLIENT", "LIST")
            return sum(1 for line in clients.split(b"\n") if b"cmd=blpop" in line)

        for _ in range(500):
            if await blocked():
                break
            await asyncio.sleep(0.02)
        assert await blocked() == 1, "the BLPOP reached the server"
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # Its connection is closed, so the server no longer runs it.
        for _ in range(500):
            if not await blocked():
                break
            await asyncio.sleep(0.02)
        assert await blocked() == 0
        # Nobody waits on the list any more: the cancelled BLPOP was not retried.
        assert await client.execute("LPUSH", "py:cancel", "x") == 1
        assert await client.execute("LLEN", "py:cancel") == 1


async def test_hints_name_the_python_api(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        with pytest.raises(sr.ConfigError) as e:
            await client.execute("MULTI")
        assert "client.transaction(commands)" in str(e.value)
        assert "Client::" not in str(e.value)
        with pytest.raises(sr.ConfigError) as e:
            await client.execute("WATCH", "k")
        assert "watch=[...]" in str(e.value)


async def test_transactions_with_watch(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        await client.execute("DEL", "py:tx")
        assert await client.transaction([["INCR", "py:tx"], ["INCR", "py:tx"]], watch=["py:tx"]) == [1, 2]
        async with await client.begin_transaction() as tx:
            await tx.watch("py:tx")
            assert await tx.execute("GET", "py:tx") == b"2"
            assert await tx.exec([["INCRBY", "py:tx", "10"]]) == [12]
            with pytest.raises(sr.ConfigError):
                await tx.exec([["INCR", "py:tx"]])  # ended
        # A watched key changed by someone else: None, nothing ran.
        async with await client.begin_transaction() as tx:
            await tx.watch("py:tx")
            await client.execute("SET", "py:tx", "100")
            assert await tx.exec([["INCR", "py:tx"]]) is None
        assert await client.execute("GET", "py:tx") == b"100"
        # A command failing inside EXEC is an exception object in its place.
        replies = await client.transaction([["SET", "py:tx2", "a"], ["INCR", "py:tx2"]])
        assert replies is not None and replies[0] in (b"OK", "OK")
        assert isinstance(replies[1], sr.ServerError)
    with sr.BlockingClient.connect(topology.url) as bclient:
        with bclient.begin_transaction() as btx:
            btx.watch("py:tx")
            assert btx.execute("GET", "py:tx") == b"100"
            assert btx.exec([["INCR", "py:tx"]]) == [101]
        assert bclient.transaction([["INCR", "py:tx"], ["INCRBY", "py:tx", "2"]], watch=["py:tx"]) == [102, 104]
        failed = bclient.transaction([["SET", "py:tx2", "a"], ["INCR", "py:tx2"]])
        assert failed is not None and isinstance(failed[1], sr.ServerError)


async def test_a_transaction_timeout_bounds_every_step_until_exec(topology: Topology) -> None:
    async with sr.Client.connect(topology.url, command_timeout_ms=30000) as client:
        # Time between the steps counts: the step after the deadline raises TimeoutError and
        # ends the transaction.
        async with await client.begin_transaction(timeout=0.4) as tx:
            await tx.watch("py:txd")
            await asyncio.sleep(0.5)
            with pytest.raises(sr.TimeoutError):
                await tx.execute("GET", "py:txd")
            with pytest.raises(sr.ConfigError, match="has ended"):
                await tx.exec([["SET", "py:txd", "1"]])
        assert await client.transaction([["SET", "py:txd", "2"]], timeout=5) == [b"OK"]
        for bad in (0, -1, float("nan"), float("inf")):
            with pytest.raises(sr.ConfigError):
                await client.transaction([["SET", "py:txd", "3"]], timeout=bad)
            with pytest.raises(sr.ConfigError):
                await client.begin_transaction(timeout=bad)
    with sr.BlockingClient.connect(topology.url, command_timeout_ms=30000) as bclient:
        with bclient.begin_transaction(timeout=0.4) as btx:
            btx.watch("py:txd")
            time.sleep(0.5)
            with pytest.raises(sr.TimeoutError):
                btx.exec([["SET", "py:txd", "4"]])
        assert bclient.execute("GET", "py:txd") == b"2"
        with pytest.raises(sr.ConfigError):
            bclient.transaction([["SET", "py:txd", "5"]], timeout=0)


async def test_exec_is_refused_after_a_failover(fresh_topology) -> None:
    topo = fresh_topology()
    async with sr.Client.connect(topo.url, command_timeout_ms=10000) as client:
        await client.execute("SET", "py:f", "1")
        old = client.topology()["primary"]
        tx = await client.begin_transaction()
        await tx.watch("py:f")
        topo.cmd("failover")
        topo.cmd(f"wait-primary-not {topo.primary_port} 40000")
        await async_wait_until(lambda: client.topology()["primary"] not in (None, old), 40, "the client to follow")
        with pytest.raises(sr.ConnectionLostError) as e:
            await tx.exec([["INCR", "py:f"]])
        assert "nothing was applied" in str(e.value)
        assert await client.execute("GET", "py:f") == b"1"


def test_log_lines_reach_logging_without_secrets(refusing_port: int, caplog) -> None:
    caplog.set_level(5, logger="sentinel_recovery")
    url = f"redis+sentinel://app:pw-Secret-42@127.0.0.1:{refusing_port}/svc?sentinel_password=sent-Secret-43"
    client = sr.BlockingClient.open(url, connect_timeout_ms=200)
    try:
        wait_until(
            lambda: [r for r in caplog.records if r.name.startswith("sentinel_recovery") and r.levelno >= logging.WARNING],
            30,
            "a warning about the unreachable sentinel",
        )
    finally:
        client.close()
    assert all("Secret-4" not in r.getMessage() for r in caplog.records)
    assert all(r.name.startswith("sentinel_recovery") for r in caplog.records if r.name.startswith("sentinel"))
