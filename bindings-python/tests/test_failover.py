"""kill -9 of the primary under concurrent writers: nobody hangs, nothing acknowledged by the new
primary is lost, only timeout/connection_lost reach the application, events arrive in order."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Dict, List

import sentinel_recovery as sr
from sentinel_recovery import _native
from conftest import async_wait_until, wait_until

WRITERS = 16


async def test_failover_with_concurrent_writers(fresh_topology) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    async with sr.Client.connect(t.url, command_timeout_ms=3000) as client:
        await client.execute("SET", "py:counter", 0)
        events: List[dict] = []
        stream = client.events()

        async def collect() -> None:
            async for e in stream:
                events.append(e)

        collector = asyncio.ensure_future(collect())

        # A blocking client's callback and iterator see the same events.
        blocking = sr.BlockingClient.connect(t.url)
        callback_events: List[dict] = []
        callback_threads = set()

        def on_event(e: dict) -> None:
            callback_threads.add((_native._on_core_thread(), threading.current_thread().ident))
            callback_events.append(e)

        blocking.on_event(on_event)
        blocking_iter = blocking.events()

        stop = asyncio.Event()
        issued = 0
        acked = 0
        acked_after_switch = 0
        switched = asyncio.Event()
        errors: Dict[str, int] = {}

        async def writer() -> None:
            nonlocal issued, acked, acked_after_switch
            while not stop.is_set():
                issued += 1
                after = switched.is_set()
                try:
                    await client.execute("INCR", "py:counter")
                    acked += 1
                    if after:
                        acked_after_switch += 1
                except sr.Error as e:
                    errors[e.code] = errors.get(e.code, 0) + 1
                    await asyncio.sleep(0.005)

        writers = [asyncio.ensure_future(writer()) for _ in range(WRITERS)]
        await async_wait_until(lambda: acked > 200, 10, "writes before the kill")
        t.cmd(f"kill9 {old_port}")
        new = await asyncio.get_running_loop().run_in_executor(None, t.cmd, f"wait-primary-not {old_port} 30000", 40)
        await async_wait_until(
            lambda: (client.topology()["primary"] or {}).get("port") == new["port"], 20, "client on the new primary"
        )
        switched.set()
        await async_wait_until(lambda: acked_after_switch > 200, 20, "writes after the switch")
        stop.set()
        done, pending = await asyncio.wait(writers, timeout=10)
        assert not pending, "a writer hung"
        for w in done:
            w.result()

        final = int(await client.execute("GET", "py:counter"))
        assert final <= issued
        assert final >= acked_after_switch
        assert set(errors) <= {"timeout", "connection_lost"}, errors

        await async_wait_until(lambda: any(e["kind"] == "primary_changed" for e in events), 10, "primary_changed")
        changed = [e for e in events if e["kind"] == "primary_changed"]
        assert changed[-1]["old"]["port"] == old_port
        assert changed[-1]["new"]["port"] == new["port"]
        assert all(e["service"] == t.service for e in events)
        ats = [e["at"] for e in events]
        assert ats == sorted(ats), "events out of order"

        wait_until(lambda: any(e["kind"] == "primary_changed" for e in callback_events), 10, "callback event")
        kinds = []
        while True:
            e = blocking_iter.next(timeout=0.5)
            if e is None:
                break
            kinds.append(e["kind"])
        assert "primary_changed" in kinds
        assert [e["kind"] for e in callback_events] == kinds
        # Callbacks run on the binding's dispatcher thread: not a core thread, not this one.
        assert callback_threads and all(not on_core for on_core, _ in callback_threads)
        assert threading.get_ident() not in {ident for _, ident in callback_threads}
        blocking.close()
        count = len(callback_events)
        time.sleep(0.2)
        assert len(callback_events) == count  # nothing after close returned
    await asyncio.wait_for(collector, 10)  # the iterator ended with the client


def test_blocking_writers_survive_failover(fresh_topology) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    with sr.BlockingClient.connect(t.url, command_timeout_ms=3000) as client:
        stop = threading.Event()
        codes: Dict[str, int] = {}
        acked = [0] * 4

        def writer(i: int) -> None:
            while not stop.is_set():
                try:
                    client.execute("INCR", "py:bcounter")
                    acked[i] += 1
                except sr.Error as e:
                    codes[e.code] = codes.get(e.code, 0) + 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        wait_until(lambda: sum(acked) > 100, 10, "writes before the kill")
        t.cmd(f"kill9 {old_port}")
        new = t.cmd(f"wait-primary-not {old_port} 30000", 40)
        before = sum(acked)
        wait_until(
            lambda: (client.topology()["primary"] or {}).get("port") == new["port"] and sum(acked) > before + 100,
            20,
            "writes on the new primary",
        )
        stop.set()
        for th in threads:
            th.join(10)
            assert not th.is_alive(), "a writer hung"
        assert set(codes) <= {"timeout", "connection_lost"}, codes
