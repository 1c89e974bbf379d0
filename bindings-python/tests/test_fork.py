"""A forked child (multiprocessing, fork start method) opens its own client: the core runtime and
the dispatcher restart under the child's pid."""

from __future__ import annotations

import asyncio
import multiprocessing

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
