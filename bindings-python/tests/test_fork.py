"""Fork: a child opens its own client (the core runtime and the dispatcher restart under the
child's pid), and a child uses the clients its parent opened before the fork (os.fork,
multiprocessing's fork start method, a pre-forking server)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import select
import signal
import time
import uuid
from typing import Callable, Dict, List, Tuple

import sentinel_recovery as sr
from conftest import Topology


def _child(url: str, out) -> None:
    try:
        with sr.BlockingClient.connect(url) as client:
            client.execute("SET", "py:fork", "child")
            got = client.execute("GET", "py:fork")

        async def main() -> bytes:
            async with sr.Client.connect(url) as c:
                return await c.execute("GET", "py:fork")

        got_async = asyncio.run(main())
        out.put(("ok", got, got_async))
    except BaseException as e:  # report anything to the parent
        out.put(("error", repr(e), None))


def test_forked_child_opens_its_own_client(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url) as parent:
        parent.execute("SET", "py:fork", "parent")
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_child, args=(topology.url, out))
        child.start()
        result = out.get(timeout=30)
        child.join(30)
        assert result == ("ok", b"child", b"child"), result
        assert child.exitcode == 0
        # The parent's client and runtime are untouched by the child.
        assert parent.execute("GET", "py:fork") == b"child"
        assert parent.execute("PING") == b"PONG"


# ---- Clients inherited across fork() (gunicorn --preload, Celery prefork): issue 10, case 6 ----
#
# The parent opens and uses its clients, then forks; the child uses those very objects. The core
# must notice the changed pid, take a monitor of the child's own and drop the inherited
# connections (whose sockets the parent keeps using). Every wait below is bounded; a child that
# hangs is killed (by its pid, it is ours) and the test fails.

CHILD_DEADLINE = 40.0


def _use_both(blocking: sr.BlockingClient, client: sr.Client, tag: str) -> Dict[str, object]:
    """SET/GET through the inherited BlockingClient and, on a new loop, the asyncio Client."""
    key = f"py:fork:inherited:{tag}"
    blocking.execute("SET", key, f"blocking-{tag}")
    got_blocking = blocking.execute("GET", key)

    async def run() -> bytes:
        await client.execute("SET", key + ":async", f"async-{tag}")
        return await client.execute("GET", key + ":async")

    got_async = asyncio.run(run())
    return {"blocking": got_blocking.decode(), "async": got_async.decode(), "pid": os.getpid()}


def _open_both(url: str) -> Tuple[sr.BlockingClient, sr.Client]:
    blocking = sr.BlockingClient.connect(url)

    async def open_async() -> sr.Client:
        c = await sr.Client.connect(url)
        assert await c.execute("PING") == b"PONG"  # connections exist before the fork
        return c

    client = asyncio.run(open_async())
    assert blocking.execute("PING") == b"PONG"
    return blocking, client


def _close_both(blocking: sr.BlockingClient, client: sr.Client) -> None:
    blocking.close()

    async def close() -> None:
        await client.close()

    asyncio.run(close())


def _fork(work: Callable[[], Dict[str, object]]) -> Tuple[int, int]:
    """Forks a child that runs `work`, writes its JSON result to a pipe and `os._exit`s (0 on
    success). Returns (pid, read end of the pipe)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(r)
            try:
                result = {"ok": True, **work()}
                code = 0
            except BaseException as e:  # report anything
                result = {"ok": False, "error": repr(e)}
            os.write(w, json.dumps(result).encode())
        finally:
            os._exit(code)
    os.close(w)
    return pid, r


def _kill(pid: int) -> None:
    """Kills and reaps a forked child of this test (by its pid: it is ours)."""
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except OSError:
        pass


def _wait_child(pid: int, r: int, deadline: float) -> Tuple[Dict[str, object], int]:
    """The child's result and exit status, waiting until `deadline` (then the child is killed)."""
    data = b""
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"forked child {pid} gave no result in time")
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                continue
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"forked child {pid} did not exit in time")
            time.sleep(0.02)
    except BaseException:
        _kill(pid)
        raise
    finally:
        os.close(r)
    result = json.loads(data.decode() or "{}")
    return result, os.waitstatus_to_exitcode(status)


def test_os_fork_child_uses_the_clients_of_its_parent(topology: Topology) -> None:
    blocking, client = _open_both(topology.url)
    try:
        tag = uuid.uuid4().hex
        pid, r = _fork(lambda: _use_both(blocking, client, tag))
        result, code = _wait_child(pid, r, time.monotonic() + CHILD_DEADLINE)
        assert result.get("ok"), result
        assert result["blocking"] == f"blocking-{tag}" and result["async"] == f"async-{tag}", result
        assert code == 0
        # The parent's clients still work, and see what the child wrote.
        assert blocking.execute("GET", f"py:fork:inherited:{tag}") == f"blocking-{tag}".encode()
        after = _use_both(blocking, client, "parent-" + tag)
        assert after["blocking"] == f"blocking-parent-{tag}", after
        assert after["async"] == f"async-parent-{tag}", after
    finally:
        _close_both(blocking, client)


def _mp_child(blocking: sr.BlockingClient, client: sr.Client, tag: str, out) -> None:
    try:
        out.put(("ok", _use_both(blocking, client, tag)))
    except BaseException as e:
        out.put(("error", repr(e)))


def test_multiprocessing_fork_child_uses_the_clients_of_its_parent(topology: Topology) -> None:
    blocking, client = _open_both(topology.url)
    try:
        tag = uuid.uuid4().hex
        ctx = multiprocessing.get_context("fork")
        out = ctx.Queue()
        child = ctx.Process(target=_mp_child, args=(blocking, client, tag, out))
        child.start()
        try:
            status, result = out.get(timeout=CHILD_DEADLINE)
            child.join(15)
        finally:
            if child.is_alive():
                child.kill()
                child.join(5)
        assert status == "ok", result
        assert result["blocking"] == f"blocking-{tag}" and result["async"] == f"async-{tag}", result
        assert child.exitcode == 0
        after = _use_both(blocking, client, "parent-" + tag)
        assert after["blocking"] == f"blocking-parent-{tag}", after
    finally:
        _close_both(blocking, client)


def test_pre_forking_server_workers_share_the_parents_clients(topology: Topology) -> None:
    """gunicorn --preload: the master opens the client, forks 3 workers; each runs commands and
    exits 0, while the master keeps using its client."""
    blocking, client = _open_both(topology.url)
    counter = f"py:fork:prefork:{uuid.uuid4().hex}"
    per_worker = 20
    try:
        blocking.execute("SET", counter, 0)

        def worker(n: int) -> Dict[str, object]:
            for _ in range(per_worker):
                blocking.execute("INCR", counter)
            return _use_both(blocking, client, f"{counter}:{n}")

        pending: List[Tuple[int, int]] = []  # forked, not yet handed to _wait_child
        results: List[Tuple[Dict[str, object], int]] = []
        try:
            for n in range(3):
                pending.append(_fork(lambda n=n: worker(n)))
            # The master works while its workers do.
            assert blocking.execute("PING") == b"PONG"
            deadline = time.monotonic() + CHILD_DEADLINE
            while pending:
                pid, r = pending.pop(0)
                results.append(_wait_child(pid, r, deadline))  # kills the child on failure
        finally:
            for pid, r in pending:
                _kill(pid)
                os.close(r)
        for n, (result, code) in enumerate(results):
            assert result.get("ok"), (n, result)
            assert result["blocking"] == f"blocking-{counter}:{n}", (n, result)
            assert code == 0, (n, code)
        assert len({result["pid"] for result, _ in results}) == 3
        assert blocking.execute("GET", counter) == str(3 * per_worker).encode()
        after = _use_both(blocking, client, "master")
        assert after["blocking"] == "blocking-master" and after["async"] == "async-master", after
    finally:
        _close_both(blocking, client)
