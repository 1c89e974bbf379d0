"""Core log records reach Python's logging under `sentinel_recovery`, without secrets."""

from __future__ import annotations

import logging

import sentinel_recovery as sr
from conftest import Topology, wait_until


def test_core_logs_reach_python_logging(topology: Topology, caplog) -> None:
    caplog.set_level(logging.DEBUG, logger="sentinel_recovery")
    url = topology.url.replace("redis+sentinel://", "redis+sentinel://:pw-not-in-logs@")
    with sr.BlockingClient.connect(url, sentinel_timeout_ms=400) as client:
        client.refresh()
        records = wait_until(
            lambda: [r for r in caplog.records if r.name.startswith("sentinel_recovery")],
            10,
            "a log record from the core",
        )
    assert any(r.levelno >= logging.DEBUG for r in records)
    assert all("pw-not-in-logs" not in r.getMessage() for r in caplog.records)


def test_levels_below_the_logger_level_are_not_forwarded(topology: Topology, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="sentinel_recovery")
    with sr.BlockingClient.connect(topology.url) as client:
        client.refresh()
        client.execute("PING")
    assert [r for r in caplog.records if r.name.startswith("sentinel_recovery") and r.levelno < logging.ERROR] == []
