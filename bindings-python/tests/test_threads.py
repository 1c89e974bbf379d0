"""The host's threads keep running: Python threads while BlockingClient waits, the asyncio loop
while Client waits, and callbacks never run on core threads."""

from __future__ import annotations

import asyncio
import threading

import sentinel_recovery as sr
from sentinel_recovery import _native
from conftest import Topology, wait_until


def test_cpu_thread_runs_while_blocking_client_waits(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url, command_timeout_ms=5000) as client:
        stop = threading.Event()
        counter = [0]

        def spin() -> None:
            n = 0
            while not stop.is_set():
                n += 1
                if n % 1000 == 0:
                    counter[0] = n

        th = threading.Thread(target=spin)
        th.start()
        try:
            wait_until(lambda: counter[0] > 0, 5, "spinner started")
            before = counter[0]
            # Half the sentinels' down-after (1000 ms): long enough to wait on, short enough that
            # the shared topology's primary is never flagged down and failed over.
            assert client.execute("DEBUG", "SLEEP", "0.5") == b"OK"
            during = counter[0] - before
        finally:
            stop.set()
            th.join()
        # The GIL was released while waiting: the spinner made progress during the wait.
        assert during > 0


async def test_event_loop_runs_while_client_waits(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        try:
            await client.execute("DEBUG", "SLEEP", "0.5")
        finally:
            task.cancel()
        assert ticks > 0


def test_callbacks_and_completions_not_on_core_threads(topology: Topology) -> None:
    seen = []

    async def main() -> None:
        async with sr.Client.connect(topology.url) as client:
            fut = asyncio.get_running_loop().create_future()
            fut.add_done_callback(lambda f: seen.append(("done_callback", _native._on_core_thread(), threading.get_ident())))
            await client.execute("PING")
            seen.append(("after_await", _native._on_core_thread(), threading.get_ident()))

    asyncio.run(main())
    assert seen and all(on_core is False for _, on_core, _ in seen)


def test_concurrent_threads_share_a_blocking_client(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url) as client:
        client.execute("DEL", "py:t")
        errors = []

        def work() -> None:
            try:
                for _ in range(200):
                    client.execute("INCR", "py:t")
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=work) for _ in range(8)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(30)
        assert not errors
        assert client.execute("GET", "py:t") == b"1600"
