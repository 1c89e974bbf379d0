"""Ctrl-C (SIGINT) interrupts a blocking call: `BlockingClient.execute` waits with the GIL released
but wakes regularly to run Python's signal handlers, so `BLPOP k 0` can be interrupted."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import uuid
from typing import IO, List

import sentinel_recovery as sr
from conftest import Topology, wait_until

# Runs in a child interpreter: blocks in BLPOP forever until SIGINT arrives.
CHILD = r"""
import signal, sys, time
import sentinel_recovery as sr

# As in an interactive interpreter, whatever the parent's disposition of SIGINT was.
signal.signal(signal.SIGINT, signal.default_int_handler)
url, key = sys.argv[1], sys.argv[2]
client = sr.BlockingClient.connect(url)
print("blocking", flush=True)
try:
    client.execute("BLPOP", key, 0)
    print("returned", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
    # The client still works after the interrupt.
    client.execute("SET", key + ":after", "ok")
    print("after", client.execute("GET", key + ":after").decode(), flush=True)
    # The interrupted BLPOP must not stay blocked on the server, where it would swallow the next
    # value pushed to the key.
    deadline = time.monotonic() + 5
    while b"cmd=blpop" in client.execute("CLIENT", "LIST"):
        if time.monotonic() > deadline:
            print("still-blocked", flush=True)
            break
        time.sleep(0.02)
    else:
        client.execute("LPUSH", key, "kept")
        time.sleep(0.2)
        print("kept", client.execute("LLEN", key), flush=True)
    raise
"""


def _lines(stream: IO[str]) -> "queue.Queue[str]":
    q: "queue.Queue[str]" = queue.Queue()

    def read() -> None:
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put("")  # EOF

    threading.Thread(target=read, daemon=True).start()
    return q


def _interrupt_blocked_child(topology: Topology) -> "tuple[int, List[str], str]":
    """Starts the child, waits until its BLPOP blocks on the server, sends SIGINT and waits
    (bounded) for the child to exit. Returns (exit code, stdout lines, stderr)."""
    key = f"py:sigint:{uuid.uuid4().hex}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, topology.url, key],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        out = _lines(proc.stdout)
        first = out.get(timeout=30)
        assert first == "blocking", f"child did not start: {first!r}"
        with sr.BlockingClient.connect(topology.url) as observer:
            wait_until(
                lambda: b"cmd=blpop" in observer.execute("CLIENT", "LIST"),
                15,
                "the child's BLPOP to block on the server",
            )
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            raise AssertionError("SIGINT did not interrupt BlockingClient.execute('BLPOP', k, 0)") from None
        lines: List[str] = []
        while True:
            line = out.get(timeout=5)
            if line == "":
                break
            lines.append(line)
        assert proc.stderr is not None
        return code, lines, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()  # our own child, by its handle
            proc.wait()


def test_ctrl_c_interrupts_a_blocking_execute(topology: Topology) -> None:
    code, lines, err = _interrupt_blocked_child(topology)
    assert "interrupted" in lines, (lines, err)
    assert "after ok" in lines, (lines, err)
    assert code != 0
    assert err.rstrip().endswith("KeyboardInterrupt"), err


def test_an_interrupted_command_is_not_left_blocked_on_the_server(topology: Topology) -> None:
    # Needs the core to drop the command when its waiter goes away (see the report on issue 10).
    code, lines, err = _interrupt_blocked_child(topology)
    assert "interrupted" in lines, (lines, err)
    assert "still-blocked" not in lines, "the interrupted BLPOP stayed blocked on the server"
    assert "kept 1" in lines, (lines, err)
