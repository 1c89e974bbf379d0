"""Every call ends by its deadline, with several clients of one URL in the process (issue 10): a
kill -9 of the primary under 16 writers on the first of 2 or 8 asyncio clients, and under 16
threads on the first of 2 blocking clients. Every command issued must complete (reply or error)
within command_timeout_ms + a slack of when it was issued; one that completes later, or never,
fails the test, and the failure lists those commands.

Correctness never rests on a fixed sleep: the tests wait for states (writes acknowledged, the
client's primary_changed event, writes on the new primary, nothing pending), each bounded.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pytest

import sentinel_recovery as sr
from conftest import async_wait_until, wait_until

DEADLINE_MS = 3000  # command_timeout_ms of every client
SLACK_MS = 2000  # what a completion may take beyond its deadline (a busy 2-core machine)
WRITERS = 16
FAILOVER_S = 40
ALLOWED = ("timeout", "connection_lost")


class Ledger:
    """Every command issued: when, and when and how it completed. Thread-safe (the blocking test
    records from 17 threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next = 0
        # id -> [what, start, end or None, outcome or None]
        self.ops: Dict[int, List[Any]] = {}
        self.wrong: List[str] = []
        self.acked = 0
        self.errors: Dict[str, int] = {}

    def start(self, what: str) -> int:
        with self._lock:
            op = self._next
            self._next += 1
            self.ops[op] = [what, time.monotonic(), None, None]
            return op

    def settle(self, op: int, error: Optional[BaseException]) -> None:
        now = time.monotonic()
        with self._lock:
            entry = self.ops[op]
            if entry[2] is not None:
                self.wrong.append(f"{entry[0]} #{op} completed twice")
                return
            entry[2] = now
            if error is None:
                entry[3] = "ok"
                self.acked += 1
                return
            code = getattr(error, "code", type(error).__name__)
            entry[3] = code
            self.errors[code] = self.errors.get(code, 0) + 1
            if code not in ALLOWED:
                self.wrong.append(f"{entry[0]} #{op}: unexpected {code}: {error}")

    def run_blocking(self, what: str, call: Callable[[], Any]) -> bool:
        """Runs `call` (a blocking execute) as one tracked command; True if it succeeded."""
        op = self.start(what)
        try:
            call()
        except sr.Error as e:
            self.settle(op, e)
            return False
        self.settle(op, None)
        return True

    async def run_async(self, what: str, call: Callable[[], Any]) -> bool:
        """Awaits `call()` (a coroutine) as one tracked command; True if it succeeded."""
        op = self.start(what)
        try:
            await call()
        except sr.Error as e:
            self.settle(op, e)
            return False
        self.settle(op, None)
        return True

    def pending(self) -> int:
        with self._lock:
            return sum(1 for e in self.ops.values() if e[2] is None)

    def issued(self) -> int:
        with self._lock:
            return len(self.ops)

    def last_start(self) -> float:
        with self._lock:
            return max((e[1] for e in self.ops.values()), default=time.monotonic())

    def in_flight_at(self, at: float) -> int:
        """Commands issued by `at` and not completed before it."""
        with self._lock:
            return sum(1 for e in self.ops.values() if e[1] <= at and (e[2] is None or e[2] >= at))

    def late(self, now: Optional[float] = None) -> List[str]:
        """Commands not completed within deadline + slack of their start, as readable lines."""
        now = time.monotonic() if now is None else now
        limit = (DEADLINE_MS + SLACK_MS) / 1000
        out = []
        with self._lock:
            for op, (what, start, end, outcome) in sorted(self.ops.items()):
                took = (end if end is not None else now) - start
                if took > limit:
                    state = "still pending" if end is None else f"completed late ({outcome})"
                    out.append(f"{what} #{op} {state} after {took * 1000:.0f} ms")
        return out

    def any_late(self) -> bool:
        now = time.monotonic()
        limit = (DEADLINE_MS + SLACK_MS) / 1000
        with self._lock:
            return any(((e[2] if e[2] is not None else now) - e[1]) > limit for e in self.ops.values())


def check(ledger: Ledger, label: str, in_flight: int, acked_at_switch: int) -> None:
    """The assertions shared by every variant, with a summary line (shown with -s)."""
    late = ledger.late()
    print(
        f"\n{label}: {ledger.issued()} commands ({ledger.acked} ok, errors {ledger.errors}), "
        f"{in_flight} in flight at the kill, {len(late)} late or missing"
    )
    assert not late, (
        f"{label}, {in_flight} commands in flight at the kill: {len(late)} not completed within "
        f"{DEADLINE_MS} ms + {SLACK_MS} ms of issue (first 20): " + "; ".join(late[:20])
    )
    assert not ledger.wrong, ledger.wrong[:20]
    assert in_flight > 0, "no command was in flight when the kill was sent (the test shows nothing)"
    assert ledger.acked > acked_at_switch, "no write succeeded after the switch"


async def _close_all(clients: List[sr.Client]) -> None:
    """Closes every client, bounded: a close whose completion is lost must not hang the suite."""
    done, pending = await asyncio.wait(
        [asyncio.ensure_future(c.close()) for c in clients], timeout=10
    )
    for f in done:
        f.result()
    assert not pending, f"{len(pending)} of {len(clients)} closes did not complete within 10 s"


@pytest.mark.parametrize("client_count", [2, 8])
async def test_kill9_under_writers_every_command_ends_by_its_deadline(fresh_topology, client_count: int) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    loop = asyncio.get_running_loop()
    clients: List[sr.Client] = []
    try:
        for _ in range(client_count):
            clients.append(await sr.Client.connect(t.url, command_timeout_ms=DEADLINE_MS))
        first = clients[0]
        ledger = Ledger()
        stream = first.events()
        switched = asyncio.Event()

        async def watch() -> None:
            async for e in stream:
                if e["kind"] == "primary_changed" and (e.get("old") or {}).get("port") == old_port:
                    switched.set()

        watcher = asyncio.ensure_future(watch())
        stop = False

        async def writer(n: int) -> None:
            while not stop:
                if not await ledger.run_async(f"INCR#{n}", lambda: first.execute("INCR", "py:deadlines")):
                    await asyncio.sleep(0.01)  # a brief back-off, as applications do

        async def pinger() -> None:  # the second client; the others stay idle
            while not stop:
                await ledger.run_async("PING", lambda: clients[1].execute("PING"))
                await asyncio.sleep(0.5)

        tasks = [asyncio.ensure_future(writer(n)) for n in range(WRITERS)]
        tasks.append(asyncio.ensure_future(pinger()))
        try:
            await async_wait_until(lambda: ledger.acked > 200, 15, "writes before the kill")
            kill_sent_at = time.monotonic()
            await loop.run_in_executor(None, t.cmd, f"kill9 {old_port}")
            in_flight = ledger.in_flight_at(kill_sent_at)
            await asyncio.wait_for(switched.wait(), FAILOVER_S)
            acked_at_switch = ledger.acked
            # Writes succeed again, or a command is already late (then the check says which).
            await async_wait_until(
                lambda: ledger.acked > acked_at_switch + 100 or ledger.any_late(),
                FAILOVER_S,
                "writes after the switch",
            )
            stop = True
            # Wait for the state "nothing pending", bounded by the last deadline plus the slack.
            settle_by = ledger.last_start() + (DEADLINE_MS + SLACK_MS) / 1000
            await async_wait_until(
                lambda: ledger.pending() == 0 or time.monotonic() > settle_by,
                (DEADLINE_MS + SLACK_MS) / 1000 + 5,
                "every command completed or past its deadline",
            )
            check(ledger, f"{client_count} asyncio clients", in_flight, acked_at_switch)
        finally:
            stop = True
            # Tasks end once their last command completes; one whose completion never comes is
            # cancelled (the check above has reported it).
            _, stuck = await asyncio.wait(tasks, timeout=(DEADLINE_MS + SLACK_MS) / 1000)
            for task in stuck:
                task.cancel()
            await stream.aclose()
            watcher.cancel()
    finally:
        await _close_all(clients)


def test_kill9_under_threads_every_blocking_call_ends_by_its_deadline(fresh_topology) -> None:
    t = fresh_topology()
    old_port = t.primary_port
    clients: List[sr.BlockingClient] = []
    threads: List[threading.Thread] = []
    stop = threading.Event()
    try:
        for _ in range(2):
            clients.append(sr.BlockingClient.connect(t.url, command_timeout_ms=DEADLINE_MS))
        first, second = clients
        ledger = Ledger()
        switched = threading.Event()

        def on_event(e: dict) -> None:
            if e["kind"] == "primary_changed" and (e.get("old") or {}).get("port") == old_port:
                switched.set()

        first.on_event(on_event)

        def writer(n: int) -> None:
            while not stop.is_set():
                if not ledger.run_blocking(f"INCR#{n}", lambda: first.execute("INCR", "py:deadlines:threads")):
                    stop.wait(0.01)  # a brief back-off, as applications do

        def pinger() -> None:
            while not stop.is_set():
                ledger.run_blocking("PING", lambda: second.execute("PING"))
                stop.wait(0.5)

        # Daemon threads: one whose call never returns must not keep the interpreter alive.
        threads = [threading.Thread(target=writer, args=(n,), daemon=True) for n in range(WRITERS)]
        threads.append(threading.Thread(target=pinger, daemon=True))
        for th in threads:
            th.start()

        wait_until(lambda: ledger.acked > 200, 15, "writes before the kill")
        kill_sent_at = time.monotonic()
        t.cmd(f"kill9 {old_port}")
        in_flight = ledger.in_flight_at(kill_sent_at)
        assert switched.wait(FAILOVER_S), "no primary_changed away from the killed primary"
        acked_at_switch = ledger.acked
        wait_until(
            lambda: ledger.acked > acked_at_switch + 100 or ledger.any_late(),
            FAILOVER_S,
            "writes after the switch",
        )
        stop.set()
        settle_by = ledger.last_start() + (DEADLINE_MS + SLACK_MS) / 1000
        wait_until(
            lambda: ledger.pending() == 0 or time.monotonic() > settle_by,
            (DEADLINE_MS + SLACK_MS) / 1000 + 5,
            "every call returned or past its deadline",
        )
        check(ledger, f"{WRITERS} threads on the first of 2 blocking clients", in_flight, acked_at_switch)
        for th in threads:
            th.join(1)
        assert not any(th.is_alive() for th in threads), "a thread is still inside execute"
    finally:
        stop.set()
        # Close in a helper thread, bounded: a close that never returns fails instead of hanging.
        closer = threading.Thread(target=lambda: [c.close() for c in clients], daemon=True)
        closer.start()
        closer.join(10)
        assert not closer.is_alive(), "closing the blocking clients did not return within 10 s"
        for th in threads:
            th.join(5)
