"""address_map (function and text forms) and doctor(), against real topologies."""

from __future__ import annotations

import logging
from typing import Any, List

import pytest

import sentinel_recovery as sr
from conftest import Topology, async_wait_until, wait_until


async def test_an_address_map_function_maps_what_sentinels_report(topology: Topology, caplog: Any) -> None:
    port = topology.primary_port
    seen: List[Any] = []

    def nat(address: sr.Address) -> Any:
        seen.append(dict(address))
        if address["port"] == port:
            return ("localhost", port)
        raise RuntimeError("a bug in the map")  # replicas: logged, used as reported

    caplog.set_level(logging.WARNING, logger="sentinel_recovery")
    async with sr.Client.connect(topology.url, address_map=nat) as client:
        t = client.topology()
        assert t["primary"] == {"host": "localhost", "port": port, "announced": {"host": "127.0.0.1", "port": port}}
        assert await client.execute("SET", "py:mapped", "1") == b"OK"
        t = await async_wait_until(lambda: (lambda t: t if t["replicas"] else None)(client.topology()), 30, "replicas")
        assert all("announced" not in r and r["host"] == "127.0.0.1" for r in t["replicas"]), t
        await async_wait_until(
            lambda: any("address_map function raised" in r.getMessage() for r in caplog.records), 10, "the log record"
        )
    assert {"host": "127.0.0.1", "port": port} in seen


def test_the_text_form_maps_too_and_bad_entries_are_named(topology: Topology) -> None:
    port = topology.primary_port
    with sr.BlockingClient.connect(topology.url, address_map=f"127.0.0.1:{port}>localhost:{port}") as client:
        assert client.topology()["primary"]["host"] == "localhost"
        assert client.execute("PING") == b"PONG"
    with pytest.raises(sr.ConfigError, match="address_map entry #1"):
        sr.BlockingClient.open(topology.url, address_map="10.0.0.5:6379")


async def test_doctor_reports_a_healthy_topology(topology: Topology) -> None:
    report = await sr.doctor(topology.url, pings=3)
    assert isinstance(report, sr.DoctorReport)
    assert (report.status, report.exit_code) == ("healthy", 0), report.text
    assert report.verdict["exit_code"] == 0
    assert report.data["schema"] == 1
    assert report.data["service"] == topology.service
    assert all(s["ping"]["samples"] == 3 for s in report.data["sentinels"])
    assert topology.service in report.text


async def test_doctor_names_unreachable_sentinels_and_refuses_bad_options(refusing_port: int) -> None:
    url = f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster"
    report = sr.doctor_blocking(url, connect_timeout_ms=500)
    assert (report.status, report.exit_code) == ("failure", 2)
    assert report.finding("sentinel_unreachable", f"127.0.0.1:{refusing_port}") is not None, report.text
    with pytest.raises(sr.ConfigError, match="no_such_option"):
        await sr.doctor(url, no_such_option=1)


ANNOUNCED = "127.0.0.99"


def test_a_mapped_topology_is_followed_through_a_kill9_failover(fresh_topology: Any) -> None:
    """Replicas announce 127.0.0.99 (nothing answered there before the data nodes bound it, the
    testkit checks); the client maps it to 127.0.0.1 and follows the promotion under the mapped
    address, with the announced one kept beside it."""
    topo = fresh_topology()
    replicas = set(topo.cmd(f"announce-replicas {ANNOUNCED}")["replicas"])

    def nat(address: sr.Address) -> Any:
        return ("127.0.0.1", address["port"]) if address["host"] == ANNOUNCED else None

    with sr.BlockingClient.connect(topo.url, address_map=nat, command_timeout_ms=5000) as client:
        mapped = lambda port: {"host": "127.0.0.1", "port": port, "announced": {"host": ANNOUNCED, "port": port}}
        wait_until(
            lambda: sorted(map(lambda r: r["port"], client.topology()["replicas"])) == sorted(replicas)
            and all(r == mapped(r["port"]) for r in client.topology()["replicas"]),
            30,
            "the replicas under their mapped addresses",
        )
        old = topo.primary_port
        topo.cmd(f"kill9 {old}")
        promoted = topo.cmd(f"wait-primary-not {old} 40000", 60)
        assert promoted["host"] == ANNOUNCED, promoted  # what the sentinels report
        wait_until(lambda: client.topology()["primary"] == mapped(promoted["port"]), 40, "the mapped new primary")
        assert client.execute("SET", "py:mapped:after", "1") == b"OK"
