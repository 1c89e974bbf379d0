"""Shared pieces of the framework failover workloads, used by bindings-python's tests and by
bench/frameworks/python/run.py: the fault to inject, an observer of the promotion on the
sentinels, the bookkeeping of what the application was told (acknowledged) against what the
servers or workers did, and the sentinels' command counters.

Everything here is independent of the client library under test: the observer and the counters
talk to the sentinels with plain redis-py, and executions are recorded in a local file, never in
the Redis that is failing over (a record lost with the old primary would read as a lost task).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import redis

SCENARIOS = ("kill9", "failover")

# Sentinel publishes this when it has picked the replica to promote, before it sends it
# SLAVEOF NO ONE; writes acknowledged after it by a primary that is being demoted may be
# discarded. The core fences writes on the same event.
PROMOTION_EVENT = "+failover-state-send-slaveof-noone"


def sentinel_ports(info: Dict[str, Any]) -> List[int]:
    """The sentinel ports of an `sr-topology up --json` description."""
    return [int(s["port"]) for s in info["sentinels"]]


def inject(topology: Any, scenario: str, timeout_ms: int = 30_000) -> Tuple[float, int]:
    """Runs `scenario` on `topology` (an sr-topology driver: `.cmd(line)`, `.info`) and waits until
    every reachable sentinel reports a new primary. Returns (monotonic time of the fault, new
    primary port)."""
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r} (expected one of {', '.join(SCENARIOS)})")
    old = int(topology.cmd("primary")["port"])
    at = time.monotonic()
    topology.cmd(f"kill9 {old}" if scenario == "kill9" else "failover")
    new = topology.cmd(f"wait-primary-not {old} {timeout_ms}", timeout=timeout_ms / 1000 + 10)
    return at, int(new["port"])


class PromotionWatch:
    """Records the first time any sentinel publishes the promotion event (monotonic clock of this
    process), listening on every sentinel at once so the earliest one counts."""

    def __init__(self, ports: Sequence[int], host: str = "127.0.0.1") -> None:
        self.at: Optional[float] = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._subs = []
        for port in ports:
            sub = redis.Redis(host=host, port=port, socket_timeout=5).pubsub(ignore_subscribe_messages=True)
            sub.subscribe(PROMOTION_EVENT)
            self._subs.append(sub)
        self._threads = [threading.Thread(target=self._listen, args=(s,), daemon=True) for s in self._subs]
        for t in self._threads:
            t.start()

    def _listen(self, sub: Any) -> None:
        while not self._stop.is_set():
            try:
                message = sub.get_message(timeout=0.2)
            except (redis.ConnectionError, redis.TimeoutError, ValueError, OSError):
                return  # the sentinel went away; the others still listen
            if message is not None:
                now = time.monotonic()
                with self._lock:
                    if self.at is None:
                        self.at = now

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2)
        for s in self._subs:
            try:
                s.close()
            except (redis.RedisError, OSError):
                pass


def sentinel_commands(ports: Iterable[int], host: str = "127.0.0.1") -> int:
    """Commands the sentinels have served so far (sum of INFO stats total_commands_processed;
    Redis 7.0's sentinel leaves INFO commandstats empty); sentinels that do not answer count 0.
    The difference across a run is what every client asked plus the sentinels' own traffic to
    each other (a few per second per sentinel), the same for every library compared."""
    total = 0
    for port in ports:
        try:
            with redis.Redis(host=host, port=port, socket_timeout=2) as r:
                total += int(r.info("stats").get("total_commands_processed", 0))
        except (redis.RedisError, OSError):
            continue
    return total


class ExecutionLog:
    """An append-only file of executed ids, one per line, written by any process (O_APPEND writes
    of one short line are atomic), so a task's executions are counted whichever worker ran it."""

    def __init__(self, path: str) -> None:
        self.path = path
        open(path, "ab").close()

    def record(self, item: str) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (item + "\n").encode())
        finally:
            os.close(fd)

    def counts(self) -> "collections.Counter[str]":
        with open(self.path, "rb") as f:
            return collections.Counter(line.decode().strip() for line in f if line.strip())


@dataclass
class Acks:
    """What the application was told: each id sent, and when its send was acknowledged (monotonic),
    or the error it got."""

    sent: List[str] = field(default_factory=list)
    acked: Dict[str, float] = field(default_factory=dict)
    failed: Dict[str, str] = field(default_factory=dict)

    def send(self, item: str, call: Any) -> bool:
        """Runs `call()` for `item`; an exception means not acknowledged (recorded by type)."""
        self.sent.append(item)
        try:
            call()
        except Exception as e:  # any failure the application would see
            self.failed[item] = type(e).__name__
            return False
        self.acked[item] = time.monotonic()
        return True

    def longest_gap(self) -> float:
        """The longest time between two consecutive acknowledgements (seconds)."""
        times = sorted(self.acked.values())
        return max((b - a for a, b in zip(times, times[1:])), default=0.0)


@dataclass
class Tally:
    sent: int
    acked: int
    failed: int
    done: int
    twice: int
    acked_lost: int
    acked_after_promotion: int
    acked_lost_after_promotion: int
    longest_gap_s: float
    lost_ids: List[str]
    twice_ids: List[str]

    def row(self) -> Dict[str, Any]:
        d = dict(self.__dict__)
        d["lost_ids"] = d["lost_ids"][:5]
        d["twice_ids"] = d["twice_ids"][:5]
        return d


def tally(acks: Acks, done: "collections.Counter[str]", promotion_at: Optional[float]) -> Tally:
    """Compares acknowledgements with executions. `acked_lost_after_promotion` counts the ids
    acknowledged after `promotion_at` that never ran: the writes a fencing client must not lose."""
    lost = [i for i in acks.acked if done.get(i, 0) == 0]
    twice = [i for i, n in done.items() if n > 1]
    after = [i for i, t in acks.acked.items() if promotion_at is not None and t > promotion_at]
    late = [i for i in after if done.get(i, 0) == 0]
    return Tally(
        sent=len(acks.sent),
        acked=len(acks.acked),
        failed=len(acks.failed),
        done=sum(1 for i in acks.sent if done.get(i, 0) > 0),
        twice=len(twice),
        acked_lost=len(lost),
        acked_after_promotion=len(after),
        acked_lost_after_promotion=len(late),
        longest_gap_s=round(acks.longest_gap(), 3),
        lost_ids=lost,
        twice_ids=twice,
    )


def wait_settled(pending: Any, quiet_s: float, limit_s: float) -> None:
    """Waits until `pending()` is 0, or it has not changed for `quiet_s`, or `limit_s` passed:
    lost work never arrives, so waiting on it ends after a quiet spell."""
    deadline = time.monotonic() + limit_s
    last, since = None, time.monotonic()
    while time.monotonic() < deadline:
        n = pending()
        if n == 0:
            return
        if n != last:
            last, since = n, time.monotonic()
        elif time.monotonic() - since > quiet_s:
            return
        time.sleep(0.1)
