"""asyncio completions through each loop's own eventfd (src/waker.rs): many at once, several
loops in several threads, a loop closed with operations in flight, cancellation."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

import sentinel_recovery as sr
from sentinel_recovery import _native
from conftest import Topology, wait_until


def _wakers(loop: asyncio.AbstractEventLoop) -> List[int]:
    """The fds `loop` watches with a LoopWaker as reader callback."""
    selector = getattr(loop, "_selector", None)
    if selector is None:
        return []
    return [
        key.fd
        for key in selector.get_map().values()
        if key.data[0] is not None and isinstance(key.data[0]._callback, _native.LoopWaker)
    ]


def _eventfds() -> int:
    """Open eventfds of this process (the core runtime's own are there from its start)."""
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventfd]"
        except OSError:
            pass
    return n


class _Unraisable:
    """Collects what reaches sys.unraisablehook (an exception in a completion callback)."""

    def __enter__(self) -> List[Any]:
        self.seen: List[Any] = []
        self.old = sys.unraisablehook
        sys.unraisablehook = self.seen.append
        return self.seen

    def __exit__(self, *exc: Any) -> None:
        sys.unraisablehook = self.old


async def test_many_concurrent_completions_on_one_loop(topology: Topology) -> None:
    key = f"py:waker:{uuid.uuid4().hex}"
    loop = asyncio.get_running_loop()
    with _Unraisable() as seen:
        async with sr.Client.connect(topology.url) as client:
            replies = await asyncio.wait_for(
                asyncio.gather(*(client.execute("INCR", key) for _ in range(5000))), 60
            )
            assert sorted(replies) == list(range(1, 5001))
            # Completions came through one reader on this loop, not the dispatcher thread.
            assert len(_wakers(loop)) == 1
            # Sequential ones too, and the reader stays the same.
            for i in range(200):
                assert await client.execute("INCR", key) == 5001 + i
            assert len(_wakers(loop)) == 1
            # A pipeline, a server error and a nil reply take the same path.
            assert await client.pipeline([["GET", key], ["INCR", key]]) == [b"5200", 5201]
            with pytest.raises(sr.ServerError):
                await client.execute("LPUSH", key, "x")
            assert await client.execute("BLPOP", f"{key}:none", 0.1) is None
            await client.execute("DEL", key)
    assert seen == []


def test_two_loops_in_two_threads(topology: Topology) -> None:
    results: Dict[int, Any] = {}
    shared = sr.BlockingClient.connect(topology.url)  # only to check the values at the end
    prefix = f"py:waker:threads:{uuid.uuid4().hex}"

    def run(n: int) -> None:
        async def main() -> Any:
            loop = asyncio.get_running_loop()
            async with sr.Client.connect(topology.url) as client:
                key = f"{prefix}:{n}"
                got = await asyncio.gather(*(client.execute("INCR", key) for _ in range(1000)))
                for _ in range(300):
                    await client.execute("INCR", key)
                return sorted(got) == list(range(1, 1001)), _wakers(loop), threading.get_ident()

        try:
            results[n] = asyncio.run(main())
        except BaseException as e:  # reported by the assertion below
            results[n] = e

    threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a loop thread hung"
    try:
        for n in range(2):
            assert not isinstance(results[n], BaseException), results[n]
            ok, fds, _ = results[n]
            assert ok and len(fds) == 1
            assert shared.execute("GET", f"{prefix}:{n}") == b"1300"
        assert results[0][1] != results[1][1] or results[0][2] != results[1][2]
        shared.execute("DEL", f"{prefix}:0", f"{prefix}:1")
    finally:
        shared.close()


def test_loop_closed_with_operations_in_flight(topology: Topology) -> None:
    client_holder: List[sr.Client] = []
    gc.collect()
    fds_before = _eventfds()
    with _Unraisable() as seen:
        loop = asyncio.new_event_loop()
        try:
            async def start() -> List["asyncio.Task[Any]"]:
                client = await sr.Client.connect(topology.url)
                client_holder.append(client)
                # Each BLPOP gets its reply (nil) 0.5 s later, when the loop is already closed.
                return [
                    asyncio.ensure_future(client.execute("BLPOP", f"py:waker:never:{i}", 0.5))
                    for i in range(20)
                ]

            tasks = loop.run_until_complete(start())
            loop.run_until_complete(asyncio.sleep(0.1))  # the commands are sent
            assert len(_wakers(loop)) == 1
            assert not any(t.done() for t in tasks)
        finally:
            loop.close()
        # The replies arrive after the close: they must neither crash nor hang anything.
        time.sleep(1.0)
        assert not any(t.done() for t in tasks)  # no one can complete them on a closed loop
        del tasks

        # The client still works from a new loop.
        async def again() -> Any:
            client = client_holder[0]
            assert await client.execute("PING") == b"PONG"
            await client.close()

        asyncio.run(again())
        del loop
        gc.collect()
    assert seen == []
    # The closed loop's eventfd is gone once its last completion ran (nothing leaks per loop).
    wait_until(lambda: _eventfds() <= fds_before, 5, "the closed loop's eventfd released")


def test_asyncio_run_returning_with_commands_in_flight(topology: Topology) -> None:
    with _Unraisable() as seen:
        async def main() -> None:
            client = await sr.Client.connect(topology.url)
            for i in range(10):
                asyncio.ensure_future(client.execute("BLPOP", f"py:waker:left:{i}", 0.3))
            await asyncio.sleep(0.05)
            # asyncio.run cancels the tasks left and closes the loop; the client is left open.

        for _ in range(3):
            asyncio.run(main())
        gc.collect()
    assert seen == []


async def test_cancellation_still_works(topology: Topology) -> None:
    key = f"py:waker:cancel:{uuid.uuid4().hex}"
    with _Unraisable() as seen:
        async with sr.Client.connect(topology.url) as client:
            # Cancelled right away, and cancelled after the reply may already be queued: a
            # result for a cancelled future is dropped, never an InvalidStateError.
            for delay in (0, 0.0005, 0.002):
                tasks = [asyncio.ensure_future(client.execute("INCR", key)) for _ in range(200)]
                await asyncio.sleep(delay)
                for t in tasks:
                    t.cancel()
                done = await asyncio.gather(*tasks, return_exceptions=True)
                assert all(isinstance(d, (int, asyncio.CancelledError)) for d in done)
            task = asyncio.ensure_future(client.execute("BLPOP", key + ":list", 0))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await client.execute("PING") == b"PONG"
            await client.execute("DEL", key)
    assert seen == []


def test_uvloop_if_installed(topology: Topology) -> None:
    uvloop = pytest.importorskip("uvloop")

    async def main() -> List[Any]:
        async with sr.Client.connect(topology.url) as client:
            got = await asyncio.gather(*(client.execute("PING") for _ in range(500)))
            for _ in range(100):
                got.append(await client.execute("PING"))
            return got

    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(main()) == [b"PONG"] * 600
    finally:
        loop.close()
