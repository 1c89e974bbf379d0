"""Shared workload of the redis-py adapter tests: writers appending unique ids through a failover,
judged by a final read on the new primary (what was acknowledged and is missing, what is there
twice), and an observer that notes when the promotion began."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

import redis

import sentinel_recovery as sr
from conftest import Topology, wait_until


class PromotionClock:
    """Notes (monotonic) when the core first reported the failover beginning (failover_started
    or primary_changed, whichever came first) and when the primary changed."""

    def __init__(self, url: str) -> None:
        self.began: Optional[float] = None
        self.changed: Optional[float] = None
        self.new_primary: Optional[Tuple[str, int]] = None
        self._client = sr.BlockingClient.connect(url)
        self._client.on_event(self._on_event)

    def _on_event(self, event: Dict[str, Any]) -> None:
        now = time.monotonic()
        if event["kind"] in ("failover_started", "primary_changed") and event.get("old", True) is not None:
            if self.began is None:
                self.began = now
        if event["kind"] == "primary_changed" and event.get("old") is not None:
            self.changed = now
            self.new_primary = (event["new"]["host"], int(event["new"]["port"]))

    def close(self) -> None:
        self._client.close()


class Writers:
    """``threads`` threads writing ids ``"<thread>-<n>"`` (never reused): RPUSH to ``key`` through
    ``client``, or ``write(id)`` when given (Django's cache, RQ's enqueue)."""

    def __init__(
        self,
        name: str,
        client: Any = None,
        key: str = "",
        threads: int = 8,
        write: Optional[Callable[[str], Any]] = None,
        errors: Tuple[type, ...] = (),
    ) -> None:
        self.name = name
        self.client = client
        self.key = key
        self._write = write or (lambda item: client.rpush(key, item))
        self._errors = (redis.ConnectionError, redis.TimeoutError, redis.ResponseError) + tuple(errors)
        self.acked: List[Tuple[str, float]] = []
        self.errors: Counter = Counter()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    def start(self) -> "Writers":
        for t in self._threads:
            t.start()
        return self

    def _run(self, index: int) -> None:
        n = 0
        while not self._stop.is_set():
            item = f"{index}-{n}"
            n += 1
            try:
                self._write(item)
            except self._errors as e:
                with self._lock:
                    self.errors[type(e).__name__] += 1
                time.sleep(0.01)
                continue
            with self._lock:
                self.acked.append((item, time.monotonic()))
            time.sleep(0.002)  # leave CPU to the servers on a small machine

    def acked_count(self) -> int:
        with self._lock:
            return len(self.acked)

    def acked_since(self, moment: float) -> int:
        with self._lock:
            return sum(1 for _, at in self.acked if at > moment)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)

    def judge(self, final: List[Any], began: float) -> Dict[str, Any]:
        """``final``: the ids found afterwards (bytes or str; an id twice means applied twice)."""
        present = Counter(x.decode() if isinstance(x, bytes) else x for x in final)
        lost = [item for item, _ in self.acked if item not in present]
        lost_after = [item for item, at in self.acked if at > began and item not in present]
        return {
            "client": self.name,
            "acked": len(self.acked),
            "acked_after_promotion_began": sum(1 for _, at in self.acked if at > began),
            "lost": len(lost),
            "lost_after_promotion_began": len(lost_after),
            "applied_twice": sum(1 for c in present.values() if c > 1),
            "errors": dict(self.errors),
        }


def redis_py_sentinel(t: Topology, **kwargs: Any) -> "redis.sentinel.Sentinel":
    """redis-py's own Sentinel on the topology's sentinels."""
    from redis.sentinel import Sentinel

    sentinels = [(s["host"], int(s["port"])) for s in t.info["sentinels"]]
    return Sentinel(sentinels, socket_timeout=1.0, **kwargs)


def through_failover(
    t: Topology, how: str, writers: List[Writers], settle_acks: int = 150
) -> Tuple[PromotionClock, Tuple[str, int]]:
    """Runs ``writers`` through a planned failover (``how="failover"``) or a kill -9 of the
    primary (``"kill9"``), until each has acknowledged ``settle_acks`` writes after the new
    primary was reported. Returns the clock and the new primary."""
    clock = PromotionClock(t.url)
    old = t.primary_port
    for w in writers:
        w.start()
    wait_until(lambda: all(w.acked_count() > 50 for w in writers), 30, "writes before the failover")
    t.cmd("failover" if how == "failover" else f"kill9 {old}")
    answer = t.cmd(f"wait-primary-not {old} 30000", timeout=40)
    new = (answer["host"], int(answer["port"]))
    wait_until(lambda: clock.changed is not None, 30, "the core's primary_changed")
    assert clock.began is not None
    changed = clock.changed
    wait_until(
        lambda: all(w.acked_since(changed) >= settle_acks for w in writers), 40, "writes on the new primary"
    )
    for w in writers:
        w.stop()
    clock.close()
    return clock, new


def final_read(new: Tuple[str, int], key: str) -> List[bytes]:
    with redis.Redis(host=new[0], port=new[1], socket_timeout=5) as r:
        return r.lrange(key, 0, -1)
