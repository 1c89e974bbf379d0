"""The shared deadline cases (tests/cases/deadlines.tsv, issue 30) through the asyncio and the
blocking client: each call ends by its deadline with the expected outcome, and no client is
left blocked on the server afterwards (its dedicated connection was closed)."""

from __future__ import annotations

import asyncio
import pathlib
import time
import uuid
from typing import Any, Dict, List

import pytest

import sentinel_recovery as sr
from conftest import wait_until

CASES_FILE = pathlib.Path(__file__).resolve().parents[2] / "tests" / "cases" / "deadlines.tsv"
#: What a call may take beyond its deadline (scheduling on a busy 2-core machine).
SLACK_S = 1.0
#: The client default of a "per-call" case: long, so only the call's own timeout can end it.
LONG_DEFAULT_MS = 30000


def load_cases() -> List[Dict[str, Any]]:
    cases = []
    for line in CASES_FILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, deadline, timeout_ms, block_ms, expect, command = line.split("\t")
        assert deadline in ("per-call", "default"), f"{name}: deadline {deadline!r}"
        assert expect in ("timeout", "nil"), f"{name}: expect {expect!r}"
        cases.append(
            {
                "name": name,
                "deadline": deadline,
                "timeout_ms": int(timeout_ms),
                "block_ms": int(block_ms),
                "expect": expect,
                "command": command.split(" "),
            }
        )
    assert cases, f"no cases in {CASES_FILE}"
    return cases


CASES = load_cases()


def client_url(topology: Any, case: Dict[str, Any]) -> str:
    default = case["timeout_ms"] if case["deadline"] == "default" else LONG_DEFAULT_MS
    return f"{topology.url}?command_timeout_ms={default}"


def args_of(case: Dict[str, Any]) -> List[str]:
    key = f"deadline-case:{case['name']}:{uuid.uuid4().hex}"
    return [a.replace("{key}", key) for a in case["command"]]


def budget_s(case: Dict[str, Any]) -> float:
    extra = case["block_ms"] if case["deadline"] == "default" else 0
    return (case["timeout_ms"] + extra) / 1000 + SLACK_S


def blocked_clients(client: sr.BlockingClient) -> int:
    info = client.execute("INFO", "clients")
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no blocked_clients in INFO clients: {text!r}")


def check_outcome(case: Dict[str, Any], outcome: Any, took: float) -> None:
    assert took <= budget_s(case), f"{case['name']}: ended after {took:.2f} s (allowed {budget_s(case):.2f} s)"
    if case["expect"] == "timeout":
        assert isinstance(outcome, sr.TimeoutError), f"{case['name']}: expected a TimeoutError, got {outcome!r}"
    else:
        assert outcome is None, f"{case['name']}: expected a nil reply, got {outcome!r}"


def settle_server(observer: sr.BlockingClient, before: int, case: Dict[str, Any]) -> None:
    wait_until(lambda: blocked_clients(observer) <= before, 5, f"{case['name']}: the server still blocks a client")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_blocking_client_case(topology: Any, case: Dict[str, Any]) -> None:
    with sr.BlockingClient.connect(topology.url) as observer, sr.BlockingClient.connect(client_url(topology, case)) as client:
        before = blocked_clients(observer)
        timeout = case["timeout_ms"] / 1000 if case["deadline"] == "per-call" else None
        start = time.monotonic()
        try:
            outcome: Any = client.execute(*args_of(case), timeout=timeout)
        except sr.Error as e:
            outcome = e
        check_outcome(case, outcome, time.monotonic() - start)
        settle_server(observer, before, case)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_asyncio_client_case(topology: Any, case: Dict[str, Any]) -> None:
    async def run() -> None:
        with sr.BlockingClient.connect(topology.url) as observer:
            before = blocked_clients(observer)
            async with sr.Client.connect(client_url(topology, case)) as client:
                timeout = case["timeout_ms"] / 1000 if case["deadline"] == "per-call" else None
                start = time.monotonic()
                try:
                    outcome: Any = await client.execute(*args_of(case), timeout=timeout)
                except sr.Error as e:
                    outcome = e
                check_outcome(case, outcome, time.monotonic() - start)
                settle_server(observer, before, case)

    asyncio.run(run())
