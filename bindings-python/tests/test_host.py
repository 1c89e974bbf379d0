"""The host layer's guarantees, end to end through the Python binding (the core tests each once in
Rust, in core/src/host): close with 2,000 commands in flight settles every future before it
returns; an event callback may close its own client; a callback that raises is reported and later
events still arrive; close racing with a kill -9 failover neither hangs nor loses a completion, and
no callback runs after it returned; a panic inside the library is ``InternalError``, once, and the
client goes on.

Every wait is for a state and bounded; the only fixed pauses give a broken guarantee the time to
show itself (events keep coming in each of those windows)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import typing
from typing import Any, Dict, List, Optional

import pytest

import sentinel_recovery as sr
from sentinel_recovery import _types
from conftest import async_wait_until, wait_until

IN_FLIGHT = 2000
# Discovery against a refusing port fails at once and retries every 50-200 ms: a steady stream of
# discovery_failed events without any server.
RETRY = {"sentinel_timeout_ms": 200, "retry_base_ms": 50, "retry_max_ms": 200}
_SHAPES = {
    typing.get_args(typing.get_type_hints(shape)["kind"])[0]: shape for shape in typing.get_args(_types.Event)
}


def check_shape(event: Dict[str, Any]) -> None:
    """An event has exactly the keys of its typed shape."""
    shape = _SHAPES.get(event.get("kind"))
    assert shape is not None, event
    assert set(event) == set(typing.get_type_hints(shape)), event
    assert isinstance(event["at"], int) and isinstance(event["service"], str), event


def unreachable(port: int) -> str:
    return f"redis+sentinel://127.0.0.1:{port}/mymaster"


async def test_close_with_2000_commands_in_flight_settles_every_future_before_it_returns(refusing_port: int) -> None:
    client = sr.Client.open(
        unreachable(refusing_port), command_timeout_ms=60000, queue_size=IN_FLIGHT * 2, **RETRY
    )
    unraisable: List[Any] = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        tasks = [asyncio.ensure_future(client.execute("GET", f"py:host:{i}")) for i in range(IN_FLIGHT)]
        await async_wait_until(lambda: client.queued == IN_FLIGHT, 20, "every command waiting for a primary")
        assert not any(t.done() for t in tasks)
        await asyncio.wait_for(client.close(), 30)
        # Before close returned: every command completed, each with ClosedError.
        assert all(t.done() for t in tasks), f"{sum(not t.done() for t in tasks)} still pending after close"
        errors = [t.exception() for t in tasks]
        assert all(isinstance(e, sr.ClosedError) for e in errors), {type(e).__name__ for e in errors}
        assert client.closed and client.queued == 0
        # Later operations fail at once; close is idempotent.
        with pytest.raises(sr.ClosedError):
            await asyncio.wait_for(client.execute("PING"), 10)
        await asyncio.wait_for(client.close(), 10)
        await asyncio.sleep(0.2)  # a second completion would reach a done future now
    finally:
        sys.unraisablehook = old_hook
    assert unraisable == []


def test_an_event_callback_may_close_its_own_client(refusing_port: int) -> None:
    client = sr.BlockingClient.open(unreachable(refusing_port), command_timeout_ms=60000, **RETRY)
    calls: List[Dict[str, Any]] = []
    closed_inside = threading.Event()
    waiting: Dict[str, Any] = {}

    def waiter() -> None:
        try:
            waiting["result"] = client.execute("GET", "py:host:k")
        except BaseException as e:  # reported below
            waiting["error"] = e

    th = threading.Thread(target=waiter, daemon=True)
    th.start()
    wait_until(lambda: client.queued == 1, 10, "a command waiting for a primary")

    def on_event(event: Dict[str, Any]) -> None:
        calls.append(event)
        if len(calls) == 1:
            # Meanwhile discovery fails again: more events wait behind this call, and must not
            # be delivered once the close below has returned.
            time.sleep(0.6)
            client.close()  # on the dispatcher thread, inside this very callback
            closed_inside.set()

    client.on_event(on_event)
    client.refresh()
    assert closed_inside.wait(20), "the callback's close did not return"
    assert client.closed
    th.join(10)
    assert not th.is_alive(), "a command in flight did not complete when its client closed"
    assert isinstance(waiting.get("error"), sr.ClosedError), waiting
    time.sleep(0.6)  # discovery would have failed a few more times: no event may arrive
    assert len(calls) == 1, [e["kind"] for e in calls]
    check_shape(calls[0])
    with pytest.raises(sr.ClosedError):
        client.execute("PING")
    client.close()  # idempotent, also after a close from inside a callback


async def test_an_async_event_loop_may_close_its_own_client(refusing_port: int) -> None:
    client = sr.Client.open(unreachable(refusing_port), **RETRY)
    events: List[Dict[str, Any]] = []
    closed_at_ms: List[int] = []

    async def consume() -> None:
        async for event in client.events():
            check_shape(event)
            events.append(event)
            if not closed_at_ms:
                await client.close()
                closed_at_ms.append(int(time.time() * 1000) + 1)

    client.refresh()
    # The iteration ends with the client: what it still yields had happened before the close.
    await asyncio.wait_for(consume(), 20)
    assert client.closed and events
    assert all(e["at"] <= closed_at_ms[0] for e in events), (closed_at_ms, [e["at"] for e in events])


def test_a_callback_that_raises_is_reported_and_later_events_still_arrive(refusing_port: int) -> None:
    reported: List[Any] = []
    old_hook = sys.unraisablehook
    sys.unraisablehook = reported.append
    client = sr.BlockingClient.open(unreachable(refusing_port), **RETRY)
    calls: List[Dict[str, Any]] = []
    running = threading.Event()

    def on_event(event: Dict[str, Any]) -> None:
        running.set()
        calls.append(event)
        time.sleep(0.1)  # slow: close below finds a call in progress and more events waiting
        running.clear()
        raise RuntimeError(f"callback failure {len(calls)}")

    try:
        client.on_event(on_event)
        client.refresh()
        wait_until(lambda: len(calls) >= 3, 20, "events after the callback raised")
        assert running.wait(10)
        client.close()
        assert not running.is_set(), "close returned while the callback was still running"
        count = len(calls)
        time.sleep(0.4)
        assert len(calls) == count, "a callback ran after close returned"
    finally:
        client.close()
        sys.unraisablehook = old_hook
    assert len(reported) == len(calls)
    assert all(isinstance(u.exc_value, RuntimeError) and u.object is on_event for u in reported)
    assert str(reported[0].exc_value) == "callback failure 1"
    for e in calls:
        check_shape(e)


async def test_close_racing_with_a_kill9_failover(fresh_topology) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    loop = asyncio.get_running_loop()
    url = t.url
    # A third client of the same service stays open: closing the others mid-failover must not
    # disturb the monitor they share.
    other = await sr.Client.connect(url, command_timeout_ms=5000)
    client = await sr.Client.connect(url, command_timeout_ms=5000)
    blocking = sr.BlockingClient.connect(url, command_timeout_ms=5000)
    try:
        seen: List[Dict[str, Any]] = []
        blocking.on_event(seen.append)
        other_events = other.events()
        lost = asyncio.Event()

        async def watch_other() -> List[Dict[str, Any]]:
            got = []
            async for e in other_events:
                check_shape(e)
                got.append(e)
                if e["kind"] in ("connection_lost", "failover_started", "primary_changed"):
                    lost.set()
                if e["kind"] == "primary_changed" and (e["old"] or {}).get("port") == old_port:
                    break
            return got

        watcher = asyncio.ensure_future(watch_other())

        # Ledger of the asyncio client's commands: id -> outcome (None while in flight).
        ledger: Dict[int, Optional[str]] = {}
        acked = 0
        stop = False

        async def writer(n: int) -> None:
            nonlocal acked
            i = 0
            while not stop:
                op = n * 1_000_000 + i
                i += 1
                ledger[op] = None
                try:
                    await client.execute("INCR", "py:host:race")
                    ledger[op] = "ok"
                    acked += 1
                except sr.Error as e:
                    ledger[op] = e.code
                    if e.code == "closed":
                        return
                    await asyncio.sleep(0.005)

        blocking_codes: Dict[str, int] = {}
        blocking_stop = threading.Event()

        def blocking_writer() -> None:
            while not blocking_stop.is_set():
                try:
                    blocking.execute("INCR", "py:host:race:threads")
                except sr.Error as e:
                    blocking_codes[e.code] = blocking_codes.get(e.code, 0) + 1
                    if e.code == "closed":
                        return

        writers = [asyncio.ensure_future(writer(n)) for n in range(16)]
        threads = [threading.Thread(target=blocking_writer, daemon=True) for _ in range(4)]
        for th in threads:
            th.start()
        await async_wait_until(lambda: acked > 100, 15, "writes before the kill")

        await loop.run_in_executor(None, t.cmd, f"kill9 {old_port}")
        # Close while the failover is under way: once the loss is seen, before the switch.
        await asyncio.wait_for(lost.wait(), 30)
        # Writers that just got connection_lost retry after 5 ms: close with their retries in flight.
        await async_wait_until(
            lambda: any(outcome is None for outcome in ledger.values()), 10, "commands in flight after the loss"
        )
        queued = client.queued
        in_flight = [op for op, outcome in ledger.items() if outcome is None]
        assert in_flight, "no command in flight at close (the test would show nothing)"
        await asyncio.wait_for(client.close(), 15)
        unsettled = [op for op in in_flight if ledger[op] is None]
        assert not unsettled, f"{len(unsettled)} of {len(in_flight)} commands in flight at close not settled when it returned"
        stop = True

        await loop.run_in_executor(None, blocking.close)
        count = len(seen)
        for th in threads:
            th.join(10)
            assert not th.is_alive(), "a blocking call did not return after close"
        blocking_stop.set()

        done, pending = await asyncio.wait(writers, timeout=10)
        assert not pending, "an asyncio writer hung"
        codes = {outcome for outcome in ledger.values()}
        print(f"\n{len(in_flight)} commands in flight at close ({queued} waiting for a primary); outcomes {codes}; threads {blocking_codes}")
        assert codes <= {"ok", "timeout", "connection_lost", "closed"}, codes
        assert set(blocking_codes) <= {"timeout", "connection_lost", "closed"}, blocking_codes

        # The failover completes for the client that stayed open, and it writes to the new primary.
        got = await asyncio.wait_for(watcher, 40)
        assert got[-1]["kind"] == "primary_changed" and got[-1]["new"]["port"] != old_port
        assert int(await other.execute("INCR", "py:host:race")) > 0
        assert len(seen) == count, "a callback ran after close returned"
        for e in seen:
            check_shape(e)
        assert (other.topology()["primary"] or {}).get("port") == got[-1]["new"]["port"]
    finally:
        blocking.close()
        await client.close()
        await other.close()


async def test_a_panic_in_the_library_is_internal_error_and_the_client_goes_on(refusing_port: int) -> None:
    client = sr.Client.open(unreachable(refusing_port), **RETRY)
    with pytest.raises(sr.InternalError) as caught:
        await asyncio.wait_for(client._native.panic_for_test(), 10)
    assert caught.value.code == "internal"
    assert "a test panic" in str(caught.value)
    # The client still answers: with no primary to be found, with that error, not a panic.
    with pytest.raises(sr.Error) as caught:
        await client.execute("GET", "k", timeout=0.2)
    assert caught.value.code != "internal"
    await client.close()
