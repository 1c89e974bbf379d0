"""The shared deadline cases (tests/cases/deadlines.tsv, issue 30) through the asyncio and the
blocking client: each call ends by its deadline with the expected outcome, and no client is
left blocked on the server afterwards (its dedicated connection was closed). The columns are
described in the file's header. Subscribe cases go through ``subscribe`` (bounded by the client's
command_timeout_ms), doctor cases through ``doctor`` / ``doctor_blocking`` with
connect_timeout_ms = timeout_ms."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

import sentinel_recovery as sr
from conftest import Topology, case_rows, wait_until

#: What a call may take beyond its deadline (scheduling on a busy 2-core machine).
SLACK_S = 1.0
#: The client default of a "per-call" or "cancel" case: long, so only the call's own timeout
#: (or the cancel) can end it.
LONG_DEFAULT_MS = 30000
#: The client of a "no-primary" case: its only sentinel is a loopback port nobody listens on.
NO_PRIMARY_URL = "redis+sentinel://127.0.0.1:1/mymaster"


def load_cases() -> List[Dict[str, Any]]:
    cases = []
    for name, kind, deadline, state, timeout_ms, block_ms, expect, command in case_rows("deadlines.tsv", 8, 18):
        assert kind in ("command", "pipeline", "transaction", "subscribe", "doctor"), f"{name}: kind {kind!r}"
        assert deadline in ("per-call", "default", "cancel"), f"{name}: deadline {deadline!r}"
        assert state in ("healthy", "paused", "failover", "no-primary"), f"{name}: state {state!r}"
        assert expect in ("timeout", "nil", "config", "cancelled", "failure"), f"{name}: expect {expect!r}"
        assert expect != "failure" or kind == "doctor", f"{name}: expect failure is a doctor's"
        assert kind != "doctor" or command == "-" or command.startswith("watch="), f"{name}: doctor options {command!r}"
        cases.append(
            {
                "name": name,
                "kind": kind,
                "deadline": deadline,
                "paused": state == "paused",
                "failover": state == "failover",
                "no_primary": state == "no-primary",
                "timeout_ms": int(timeout_ms),
                "block_ms": int(block_ms),
                "expect": expect,
                "commands": [c.split(" ") for c in command.split(" ; ")],
                # A doctor's options: "-" for none, or "watch=SECONDS".
                "watch": float(command.split("=", 1)[1]) if kind == "doctor" and command.startswith("watch=") else None,
            }
        )
    return cases


CASES = load_cases()


@pytest.fixture(scope="module")
def topology() -> Iterator[Topology]:
    """A down-after far longer than any case: a paused primary stays the primary (no failover);
    a failover-timeout as long: a stalled failover is not aborted while a case runs."""
    t = Topology("--replicas", "1", "--down-after", "60000", "--failover-timeout", "60000")
    try:
        yield t
    finally:
        t.close()


def client_url(topology: Any, case: Dict[str, Any]) -> str:
    """The case's client: the topology's, or for "no-primary" one whose only sentinel refuses."""
    default = case["timeout_ms"] if case["deadline"] == "default" else LONG_DEFAULT_MS
    if case["no_primary"]:
        return f"{NO_PRIMARY_URL}?command_timeout_ms={default}"
    return f"{topology.url}?command_timeout_ms={default}"


def commands_of(case: Dict[str, Any]) -> List[List[str]]:
    key = f"deadline-case:{case['name']}:{uuid.uuid4().hex}"
    return [[a.replace("{key}", key) for a in c] for c in case["commands"]]


def doctor_url(topology: Any, case: Dict[str, Any]) -> str:
    """The URL a doctor case diagnoses; connect_timeout_ms bounds each of its probes."""
    url = NO_PRIMARY_URL if case["no_primary"] else topology.url
    return f"{url}?connect_timeout_ms={case['timeout_ms']}"


def channels_of(commands: List[List[str]]) -> List[str]:
    """A subscribe case's channels: the arguments of its SUBSCRIBE."""
    assert commands[0][0] == "SUBSCRIBE" and len(commands[0]) > 1, commands
    return commands[0][1:]


def own_timeout(case: Dict[str, Any]) -> Any:
    return case["timeout_ms"] / 1000 if case["deadline"] == "per-call" else None


def budget_s(case: Dict[str, Any]) -> float:
    if case["kind"] == "doctor" and case["deadline"] == "default":
        # Each step of the doctor waits for a connect and one reply at most.
        return 3 * case["timeout_ms"] / 1000 + SLACK_S
    extra = case["block_ms"] if case["deadline"] == "default" else 0
    return (case["timeout_ms"] + extra) / 1000 + SLACK_S


def blocked_clients(client: sr.BlockingClient) -> int:
    info = client.execute("INFO", "clients")
    text = info.decode() if isinstance(info, bytes) else str(info)
    for line in text.splitlines():
        if line.startswith("blocked_clients:"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"no blocked_clients in INFO clients: {text!r}")


EXPECTED = {"timeout": sr.TimeoutError, "config": sr.ConfigError, "cancelled": asyncio.CancelledError}


def check_outcome(case: Dict[str, Any], outcome: Any, took: float, cancelled: type = asyncio.CancelledError) -> None:
    assert took <= budget_s(case), f"{case['name']}: ended after {took:.2f} s (allowed {budget_s(case):.2f} s)"
    if case["expect"] == "nil":
        assert outcome is None, f"{case['name']}: expected a nil reply, got {outcome!r}"
    elif case["expect"] == "failure":
        assert isinstance(outcome, sr.DoctorReport), f"{case['name']}: expected a doctor report, got {outcome!r}"
        assert outcome.status == "failure", f"{case['name']}: report status {outcome.status!r}: {outcome.text}"
    else:
        want = cancelled if case["expect"] == "cancelled" else EXPECTED[case["expect"]]
        assert isinstance(outcome, want), f"{case['name']}: expected {want.__name__}, got {outcome!r}"


@contextlib.contextmanager
def state(topology: Topology, case: Dict[str, Any]) -> Iterator[None]:
    """Stops the current primary for a "paused" case, or stalls a failover for a "failover"
    case, and undoes it afterwards (a released failover has moved the primary)."""
    if case["paused"]:
        port = topology.cmd("primary")["port"]
        topology.cmd(f"stop {port}")
        try:
            yield
        finally:
            topology.cmd(f"cont {port}")
    elif case["failover"]:
        port = topology.cmd("stall-failover")["port"]
        try:
            yield
        finally:
            topology.cmd(f"release-failover {port} 30000", timeout=40)
    else:
        yield


def settle_server(observer: sr.BlockingClient, before: int, case: Dict[str, Any]) -> None:
    wait_until(lambda: blocked_clients(observer) <= before, 5, f"{case['name']}: the server still blocks a client")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_blocking_client_case(topology: Any, case: Dict[str, Any]) -> None:
    """Cancel cases send SIGINT (Ctrl-C) to this, the main, thread: the blocking call wakes to run
    Python's signal handlers and raises KeyboardInterrupt, which the test catches."""
    if case["deadline"] == "cancel" and threading.current_thread() is not threading.main_thread():
        pytest.skip(f"{case['name']}: SIGINT reaches the main thread only")
    url = client_url(topology, case)
    # A no-primary client is opened without waiting: connecting would fail, as none is found.
    opened = sr.BlockingClient.open(url) if case["no_primary"] else sr.BlockingClient.connect(url)
    with sr.BlockingClient.connect(topology.url) as observer, opened as client:
        before = blocked_clients(observer)
        commands = commands_of(case)
        main = threading.main_thread().ident
        assert main is not None
        ctrl_c = threading.Timer(case["timeout_ms"] / 1000, signal.pthread_kill, (main, signal.SIGINT))
        # Ctrl-C as a terminal delivers it: a process started in the background (make test from
        # a script, CI) inherits SIGINT ignored, and Python then leaves it ignored.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        with contextlib.ExitStack() as restore, state(topology, case):
            restore.callback(signal.signal, signal.SIGINT, previous)
            start = time.monotonic()
            try:
                if case["deadline"] == "cancel":
                    ctrl_c.start()
                if case["kind"] == "command":
                    outcome: Any = client.execute(*commands[0], timeout=own_timeout(case))
                elif case["kind"] == "pipeline":
                    outcome = client.pipeline(commands, timeout=own_timeout(case))
                elif case["kind"] == "transaction":
                    outcome = client.transaction(commands, timeout=own_timeout(case))
                elif case["kind"] == "subscribe":
                    outcome = client.subscribe(*channels_of(commands))
                else:
                    outcome = sr.doctor_blocking(doctor_url(topology, case), watch=case["watch"])
            except (sr.Error, KeyboardInterrupt) as e:
                outcome = e
            took = time.monotonic() - start
            if isinstance(outcome, sr.Subscription):
                # Subscribed anyway (the case fails below): don't leave it open.
                outcome.close()
            try:
                # A SIGINT that came after the call ended is caught here, not by pytest; the
                # outcome stays what the call gave.
                ctrl_c.cancel()
                if ctrl_c.is_alive():
                    ctrl_c.join()
                time.sleep(0.01)
            except KeyboardInterrupt:
                pass
        check_outcome(case, outcome, took, cancelled=KeyboardInterrupt)
        if case["paused"] or case["failover"]:
            assert client.execute("PING", timeout=10) in (b"PONG", "PONG", True), f"{case['name']}: no PING after the fault"
        settle_server(observer, before, case)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_asyncio_client_case(topology: Any, case: Dict[str, Any]) -> None:

    async def run() -> None:
        with sr.BlockingClient.connect(topology.url) as observer:
            before = blocked_clients(observer)
            url = client_url(topology, case)
            opened = sr.Client.open(url) if case["no_primary"] else sr.Client.connect(url)
            async with opened as client:
                commands = commands_of(case)

                async def call() -> Any:
                    if case["kind"] == "command":
                        return await client.execute(*commands[0], timeout=own_timeout(case))
                    if case["kind"] == "pipeline":
                        return await client.pipeline(commands, timeout=own_timeout(case))
                    if case["kind"] == "transaction":
                        return await client.transaction(commands, timeout=own_timeout(case))
                    if case["kind"] == "subscribe":
                        return await client.subscribe(*channels_of(commands))
                    return await sr.doctor(doctor_url(topology, case), watch=case["watch"])

                with state(topology, case):
                    start = time.monotonic()
                    task = asyncio.ensure_future(call())
                    if case["deadline"] == "cancel":
                        await asyncio.sleep(case["timeout_ms"] / 1000)
                        task.cancel()
                    try:
                        outcome: Any = await asyncio.wait_for(task, budget_s(case) + SLACK_S)
                    except (sr.Error, asyncio.CancelledError) as e:
                        outcome = e
                    took = time.monotonic() - start
                    if isinstance(outcome, sr.AsyncSubscription):
                        # Subscribed anyway (the case fails below): don't leave it open.
                        outcome.close()
                check_outcome(case, outcome, took)
                if case["paused"] or case["failover"]:
                    assert await client.execute("PING", timeout=10) in (b"PONG", "PONG", True), f"{case['name']}: no PING after the fault"
                settle_server(observer, before, case)

    asyncio.run(run())
