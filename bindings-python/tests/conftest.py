"""Fixtures: real Redis + Sentinel topologies started by the testkit binary `sr-topology`."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]


def _sr_topology() -> str:
    explicit = os.environ.get("SR_TOPOLOGY")
    if explicit:
        return explicit
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "debug" / "sr-topology"
    if not path.exists():
        subprocess.run(
            ["cargo", "build", "-q", "-p", "sentinel-recovery-testkit", "--bins"],
            cwd=REPO,
            check=True,
        )
    return str(path)


class Topology:
    """One running `sr-topology up --json`; commands go over its stdin, one JSON line back each."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [_sr_topology(), "up", "--json", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lines: "queue.Queue[Optional[str]]" = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        first = self._line(60)
        self.info: Dict[str, Any] = json.loads(first)
        self.url: str = self.info["url"]
        self.service: str = self.info["service"]

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _line(self, timeout: float) -> str:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"sr-topology gave no answer within {timeout}s") from None
        if line is None:
            raise AssertionError(f"sr-topology exited (code {self.proc.poll()})")
        return line

    def cmd(self, line: str, timeout: float = 60) -> Dict[str, Any]:
        """Sends one command and returns its JSON answer (asserting ok)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        answer = json.loads(self._line(timeout))
        assert answer.get("ok"), f"{line}: {answer}"
        return answer

    @property
    def primary_port(self) -> int:
        return int(self.info["primary"]["port"])

    def close(self) -> None:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # EOF stops everything
        except OSError:
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture(scope="session")
def topology() -> Iterator[Topology]:
    """A shared topology for tests that do not change it (no fault injection)."""
    t = Topology()
    try:
        yield t
    finally:
        t.close()


@pytest.fixture
def fresh_topology() -> Iterator[Callable[..., Topology]]:
    """A factory of topologies owned by one test, each torn down afterwards."""
    started: List[Topology] = []

    def start(*args: str) -> Topology:
        t = Topology(*args)
        started.append(t)
        return t

    try:
        yield start
    finally:
        for t in started:
            t.close()


@pytest.fixture
def refusing_port() -> int:
    """A loopback port nobody listens on (connections are refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def case_rows(name: str, fields: int, at_least: int) -> List[List[str]]:
    """The rows of a shared cases file (``tests/cases/NAME``, which every binding's suite reads):
    its lines that are neither blank nor comments, split at tabs, each with ``fields`` fields,
    and at least ``at_least`` of them."""
    path = Path(__file__).resolve().parents[2] / "tests" / "cases" / name
    rows = [line.split("\t") for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    for row in rows:
        assert len(row) == fields, f"{path}: {fields} tab-separated fields in {row!r}"
    assert len(rows) >= at_least, f"{path}: {len(rows)} cases"
    return rows


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Polls `predicate` until it returns something truthy; fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


async def async_wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """`wait_until` for coroutines: polls without blocking the loop."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)
