"""Every error code reaches Python as its own exception class, from real situations where possible."""

from __future__ import annotations

import asyncio
import builtins
import pickle
import time

import pytest

import sentinel_recovery as sr
from sentinel_recovery._errors import _make_error
from conftest import Topology, wait_until

CODES = {
    "config": sr.ConfigError,
    "sentinels_unreachable": sr.SentinelsUnreachableError,
    "service_unknown": sr.ServiceUnknownError,
    "no_healthy_primary": sr.NoHealthyPrimaryError,
    "timeout": sr.TimeoutError,
    "connection_lost": sr.ConnectionLostError,
    "server": sr.ServerError,
    "protocol": sr.ProtocolError,
    "tls": sr.TlsError,
    "auth": sr.AuthError,
    "closed": sr.ClosedError,
    "queue_full": sr.QueueFullError,
    "internal": sr.InternalError,
    "not_replicated": sr.NotReplicatedError,
}


def test_one_class_per_code_and_builtin_bases() -> None:
    for code, cls in CODES.items():
        err = _make_error(code, "msg", None)
        assert type(err) is cls and isinstance(err, sr.Error) and err.code == code
        assert str(err) == f"{code}: msg"
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is cls and copy.message == "msg"
    assert issubclass(sr.TimeoutError, builtins.TimeoutError)
    assert issubclass(sr.ConnectionLostError, builtins.ConnectionError)
    assert issubclass(sr.ConfigError, ValueError)


def test_config_errors_name_the_offending_part() -> None:
    with pytest.raises(sr.ConfigError, match="scheme"):
        sr.BlockingClient.open("http://127.0.0.1/mymaster")
    with pytest.raises(sr.ConfigError, match="nope"):
        sr.BlockingClient.open("redis+sentinel://127.0.0.1/mymaster", nope=1)
    with pytest.raises(sr.ConfigError, match="command_timeout_ms"):
        sr.BlockingClient.open("redis+sentinel://127.0.0.1/mymaster", command_timeout_ms="soon")
    with pytest.raises(ValueError):  # ConfigError is a ValueError
        sr.Client.open("redis+sentinel://127.0.0.1:99999/mymaster")


def test_secrets_never_in_errors_or_repr(refusing_port: int) -> None:
    url = f"redis+sentinel://user:hunter2-secret@127.0.0.1:{refusing_port}/mymaster"
    with pytest.raises(sr.Error) as info:
        sr.BlockingClient.connect(url, sentinel_password="other-secret", sentinel_timeout_ms=200)
    assert "hunter2" not in str(info.value) and "other-secret" not in str(info.value)
    client = sr.BlockingClient.open(url, sentinel_password="other-secret")
    try:
        assert "hunter2" not in repr(client) and "other-secret" not in repr(client)
    finally:
        client.close()
    with pytest.raises(sr.ConfigError) as info:
        sr.BlockingClient.open("redis+sentinel://u:hunter2-secret@127.0.0.1/m", db="x")
    assert "hunter2" not in str(info.value)


async def test_sentinels_unreachable(refusing_port: int) -> None:
    url = f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster"
    with pytest.raises(sr.SentinelsUnreachableError):
        await sr.Client.connect(url, sentinel_timeout_ms=300)
    with pytest.raises(sr.SentinelsUnreachableError):
        sr.BlockingClient.connect(url, sentinel_timeout_ms=300)


def test_service_unknown(topology: Topology) -> None:
    url = topology.url.replace(f"/{topology.service}", "/no-such-service")
    with pytest.raises(sr.ServiceUnknownError):
        sr.BlockingClient.connect(url)


async def test_timeout_and_queue_full_while_no_primary(refusing_port: int) -> None:
    url = f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster"
    client = sr.Client.open(url, command_timeout_ms=200, sentinel_timeout_ms=100)
    try:
        with pytest.raises(sr.TimeoutError) as info:
            await client.execute("GET", "k")
        assert isinstance(info.value, builtins.TimeoutError)
    finally:
        await client.close()
    blocking = sr.BlockingClient.open(url, queue_size=0)
    try:
        with pytest.raises(sr.QueueFullError):
            blocking.execute("GET", "k")
    finally:
        blocking.close()


async def test_waiting_command_fails_with_closed_when_client_closes(refusing_port: int) -> None:
    client = sr.Client.open(f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster", command_timeout_ms=30000)
    pending = asyncio.ensure_future(client.execute("GET", "k"))
    await asyncio.sleep(0.1)
    assert not pending.done()
    await client.close()
    with pytest.raises(sr.ClosedError):
        await asyncio.wait_for(pending, 10)


def test_command_timeout_on_slow_server(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url) as client:
        with pytest.raises(sr.TimeoutError):
            client.execute("DEBUG", "SLEEP", "0.6", timeout=0.2)
        assert wait_until(lambda: client.execute("PING") == b"PONG", 10, "PING after timeout")


async def test_server_error_reply(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        await client.execute("SET", "py:str", "x")
        with pytest.raises(sr.ServerError) as info:
            await client.execute("LPUSH", "py:str", "y")
        assert info.value.server_code == "WRONGTYPE"
        assert info.value.code == "server"
        with pytest.raises(sr.ServerError) as info:
            await client.execute("NOSUCHCOMMAND")
        assert info.value.server_code == "ERR"


def test_closed_topology_and_connection_lost(fresh_topology) -> None:
    t = fresh_topology()
    client = sr.BlockingClient.connect(t.url, command_timeout_ms=10000)
    try:
        import threading

        result: dict = {}

        def slow() -> None:
            try:
                result["value"] = client.execute("DEBUG", "SLEEP", "3")
            except sr.Error as e:
                result["error"] = e

        th = threading.Thread(target=slow)
        th.start()
        time.sleep(0.3)  # let DEBUG SLEEP reach the primary before the kill
        t.cmd(f"kill9 {t.primary_port}")
        th.join(15)
        assert not th.is_alive()
        assert isinstance(result.get("error"), sr.ConnectionLostError), result
        assert isinstance(result["error"], builtins.ConnectionError)
    finally:
        client.close()
    with pytest.raises(sr.ClosedError):
        client.topology()


def test_no_healthy_primary(fresh_topology) -> None:
    # One sentinel with quorum 2: it flags the stopped primary s_down but can never fail over.
    t = fresh_topology("--sentinels", "1", "--quorum", "2", "--replicas", "1")
    t.cmd(f"stop {t.primary_port}")
    try:
        def refused() -> bool:
            try:
                sr.BlockingClient.connect(t.url, sentinel_timeout_ms=500).close()
            except sr.NoHealthyPrimaryError:
                return True
            return False

        wait_until(refused, 20, "no_healthy_primary", interval=0.2)
    finally:
        t.cmd(f"cont {t.primary_port}")
