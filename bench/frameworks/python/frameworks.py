"""The framework workloads of bench/frameworks/python/run.py, each on sentinel_recovery's adapter
("adapter") and on the library's own Sentinel support ("own"), through one fault:

- redis-py / redis.asyncio: 8 writers RPUSH unique ids; judged by a final LRANGE on the new
  primary (acknowledged and missing = lost; an id twice = applied twice);
- Django's cache (django.core.cache.backends.redis.RedisCache): 8 writers set unique keys;
  judged by EXISTS on the new primary. Django has no Sentinel mode of its own: "own" is its
  documented pool_class seam given redis-py's SentinelConnectionPool;
- RQ: one enqueuer, a real `Worker` process (a fork per job) recording each job's id in a local
  file; judged by executions (RQ's own Sentinel: `Sentinel(...).master_for` for both sides);
- Celery: celery_workload.run (adapter: sentinel_recovery.redis_py.kombu; own: kombu's
  `sentinel://` transport).

Every function takes a running sr-topology driver and returns one row (a dict).
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

import redis

import celery_workload
from failover_workload import Acks, ExecutionLog, PromotionWatch, inject, sentinel_commands, sentinel_ports, tally, wait_settled

HERE = Path(__file__).resolve().parent
MODES = ("adapter", "own")
WRITERS = 8
BEFORE_S = 1.0
AFTER_S = 1.5


def _sentinel_addresses(info: Dict[str, Any]) -> List[Tuple[str, int]]:
    return [("127.0.0.1", p) for p in sentinel_ports(info)]


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")


class _Run:
    """The common frame of one run: the promotion watch, the sentinels' command counters around
    the run (minus the sentinels' own traffic, measured before any client started), the fault
    injected from a thread while the workload goes on."""

    def __init__(self, topology: Any, scenario: str) -> None:
        self.topology = topology
        self.scenario = scenario
        self.ports = sentinel_ports(topology.info)
        self.watch = PromotionWatch(self.ports)
        start, t0 = sentinel_commands(self.ports), time.monotonic()
        time.sleep(1.0)
        self.idle_rate = (sentinel_commands(self.ports) - start - len(self.ports)) / (time.monotonic() - t0)
        self.fault: Dict[str, Any] = {}

    def through_fault(self, keep_going: Callable[[float], None]) -> None:
        """Calls keep_going(seconds) before, during and after the fault."""
        self.commands_before, self.t_before = sentinel_commands(self.ports), time.monotonic()
        keep_going(BEFORE_S)
        injector = threading.Thread(
            target=lambda: self.fault.update(zip(("at", "new_port"), inject(self.topology, self.scenario)))
        )
        injector.start()
        while injector.is_alive():
            keep_going(0.05)
        keep_going(AFTER_S)
        elapsed = time.monotonic() - self.t_before
        raw = sentinel_commands(self.ports) - self.commands_before
        self.client_commands = max(0, round(raw - self.idle_rate * elapsed))

    def row(self, framework: str, mode: str, acks: Acks, done: "collections.Counter[str]", **extra: Any) -> Dict[str, Any]:
        t = tally(acks, done, self.watch.at)
        return {
            "framework": framework, "mode": mode, "scenario": self.scenario,
            "acked": t.acked, "failed": t.failed, "lost": t.acked_lost,
            "lost_after_promotion": t.acked_lost_after_promotion, "twice": t.twice,
            "longest_gap_s": t.longest_gap_s, "sentinel_commands": self.client_commands,
            "errors": sorted(set(acks.failed.values())), **extra,
        }

    def close(self) -> None:
        self.watch.close()


class _Writers:
    """`n` threads calling write(id) with ids never reused, while `running` is set."""

    def __init__(self, write: Callable[[str], Any], n: int = WRITERS) -> None:
        self.acks = Acks()
        self._lock = threading.Lock()
        self._write = write
        self._running = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]

    def _run(self, index: int) -> None:
        n = 0
        while self._running.is_set():
            item = f"{index}-{n}"
            n += 1
            with self._lock:  # Acks is not thread-safe; the write itself runs outside the lock
                self.acks.sent.append(item)
            try:
                self._write(item)
            except Exception as e:  # what the application would see
                with self._lock:
                    self.acks.failed[item] = type(e).__name__
                time.sleep(0.01)
                continue
            with self._lock:
                self.acks.acked[item] = time.monotonic()
            time.sleep(0.002)

    def run_through(self, run: _Run) -> None:
        self._running.set()
        for t in self._threads:
            t.start()
        run.through_fault(time.sleep)
        self._running.clear()
        for t in self._threads:
            t.join(30)


def _final_list(run: _Run, key: str) -> "collections.Counter[str]":
    with redis.Redis(port=run.fault["new_port"], socket_timeout=10) as r:
        return collections.Counter(x.decode() for x in r.lrange(key, 0, -1))


def redis_py(topology: Any, mode: str, scenario: str, workdir: str) -> Dict[str, Any]:
    _check_mode(mode)
    run = _Run(topology, scenario)
    try:
        if mode == "adapter":
            from sentinel_recovery.redis_py import Sentinel

            client = Sentinel(topology.url).master_for(topology.info["service"], socket_timeout=5)
        else:
            from redis.sentinel import Sentinel as RedisPySentinel

            client = RedisPySentinel(_sentinel_addresses(topology.info), socket_timeout=1).master_for(
                topology.info["service"], socket_timeout=1)
        writers = _Writers(lambda item: client.rpush("bench:redis-py", item))
        writers.run_through(run)
        return run.row("redis-py", mode, writers.acks, _final_list(run, "bench:redis-py"))
    finally:
        run.close()


def redis_asyncio(topology: Any, mode: str, scenario: str, workdir: str) -> Dict[str, Any]:
    _check_mode(mode)
    run = _Run(topology, scenario)

    async def main() -> Acks:
        if mode == "adapter":
            from sentinel_recovery.redis_py.asyncio import Sentinel

            client = Sentinel(topology.url).master_for(topology.info["service"], socket_timeout=5)
        else:
            from redis.asyncio.sentinel import Sentinel as RedisPySentinel

            client = RedisPySentinel(_sentinel_addresses(topology.info), socket_timeout=1).master_for(
                topology.info["service"], socket_timeout=1)
        acks, running = Acks(), asyncio.Event()
        running.set()

        async def writer(index: int) -> None:
            n = 0
            while running.is_set():
                item = f"{index}-{n}"
                n += 1
                acks.sent.append(item)
                try:
                    await client.rpush("bench:redis-asyncio", item)
                except Exception as e:  # what the application would see
                    acks.failed[item] = type(e).__name__
                    await asyncio.sleep(0.01)
                    continue
                acks.acked[item] = time.monotonic()
                await asyncio.sleep(0.002)

        tasks = [asyncio.ensure_future(writer(i)) for i in range(WRITERS)]
        # The fault and its waits run on a thread; this loop keeps writing meanwhile.
        await asyncio.get_running_loop().run_in_executor(None, run.through_fault, time.sleep)
        running.clear()
        await asyncio.gather(*tasks)
        await client.aclose()
        return acks

    try:
        acks = asyncio.run(main())
        return run.row("redis.asyncio", mode, acks, _final_list(run, "bench:redis-asyncio"))
    finally:
        run.close()


class _RedisPySentinelPoolForDjango:
    """Django's pool_class seam given redis-py's SentinelConnectionPool (Django's RedisCache has
    no Sentinel mode): from_url ignores the URL and asks the sentinels in BENCH_SENTINELS."""

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        from redis.sentinel import Sentinel as RedisPySentinel
        from redis.sentinel import SentinelConnectionPool

        spec = json.loads(os.environ["BENCH_SENTINELS"])
        manager = RedisPySentinel([tuple(a) for a in spec["addresses"]], socket_timeout=1)
        return SentinelConnectionPool(spec["service"], manager, socket_timeout=1, **kwargs)


def django_cache(topology: Any, mode: str, scenario: str, workdir: str) -> Dict[str, Any]:
    _check_mode(mode)
    import django
    from django.conf import settings

    if not settings.configured:
        settings.configure()
        django.setup()
    from django.core.cache.backends.redis import RedisCache

    run = _Run(topology, scenario)
    try:
        if mode == "adapter":
            options = {"pool_class": "sentinel_recovery.redis_py.ConnectionPool", "socket_timeout": 5}
        else:
            os.environ["BENCH_SENTINELS"] = json.dumps(
                {"addresses": _sentinel_addresses(topology.info), "service": topology.info["service"]})
            options = {"pool_class": f"{__name__}._RedisPySentinelPoolForDjango"}
        # LOCATION as a list: Django splits a string at commas (its list of servers), and the
        # sentinel URL has commas between its sentinels.
        cache = RedisCache([topology.url], {"OPTIONS": options, "KEY_PREFIX": "bench"})
        writers = _Writers(lambda item: cache.set(item, 1, timeout=None))
        writers.run_through(run)
        acked = list(writers.acks.acked)
        with redis.Redis(port=run.fault["new_port"], socket_timeout=10) as r:
            pipe = r.pipeline(transaction=False)
            for item in acked:
                pipe.exists(cache.make_key(item))
            present = pipe.execute()
        done = collections.Counter({item: 1 for item, there in zip(acked, present) if there})
        row = run.row("Django cache", mode, writers.acks, done)
        row["twice"] = None  # a set applied twice is not visible in a cache
        return row
    finally:
        run.close()


def rq(topology: Any, mode: str, scenario: str, workdir: str) -> Dict[str, Any]:
    _check_mode(mode)
    from rq import Queue

    log_path = os.path.join(workdir, f"rq-{mode}-{scenario}.log")
    log = ExecutionLog(log_path)
    spec = {"mode": mode, "url": topology.url, "service": topology.info["service"],
            "sentinels": _sentinel_addresses(topology.info), "log": log_path}
    run = _Run(topology, scenario)
    connection = rq_worker.connect(spec)
    env = dict(os.environ, PYTHONFAULTHANDLER="1", PYTHONPATH=os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p))
    out = open(os.path.join(workdir, f"rq-{mode}-{scenario}.out"), "wb")
    worker = subprocess.Popen([sys.executable, str(HERE / "rq_worker.py"), json.dumps(spec)], env=env,
                              stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        queue = Queue("bench", connection=connection)
        queue.enqueue("rq_worker.record", "warm", job_id="warm")
        wait_settled(lambda: 0 if log.counts().get("warm") else 1, quiet_s=60, limit_s=60)
        if not log.counts().get("warm"):
            raise RuntimeError(f"the RQ worker ran no job within 60 s; see {out.name}")
        acks, n = Acks(), 0

        def enqueue_for(seconds: float) -> None:
            nonlocal n
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                item = f"j{n}"
                n += 1
                acks.send(item, lambda: queue.enqueue("rq_worker.record", item, job_id=item))
                time.sleep(0.01)

        run.through_fault(enqueue_for)
        wait_settled(lambda: sum(1 for i in acks.acked if not log.counts().get(i)), quiet_s=15, limit_s=60)
        return run.row("RQ", mode, acks, log.counts())
    finally:
        run.close()
        _stop_rq_worker(worker)
        out.close()


def _children(pid: int) -> List[int]:
    found = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in found.split()]


def _stop_rq_worker(worker: "subprocess.Popen[bytes]") -> None:
    """Stops the worker (its process group) and its work-horse: RQ starts each horse in a
    session of its own, so the group does not reach it. A horse still there is first asked for
    its Python stack (SIGABRT, with PYTHONFAULTHANDLER set) into the worker's output file."""
    horses = _children(worker.pid)
    os.killpg(worker.pid, signal.SIGTERM)
    try:
        worker.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait()
    for pid in horses:
        try:
            os.kill(pid, signal.SIGABRT)
            time.sleep(0.5)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def celery(topology: Any, mode: str, scenario: str, workdir: str) -> Dict[str, Any]:
    _check_mode(mode)
    broker = "adapter" if mode == "adapter" else "kombu-sentinel"
    row = celery_workload.run(topology, broker, scenario, workdir)
    return {
        "framework": "Celery", "mode": mode, "scenario": scenario, "acked": row["acked"],
        "failed": row["failed"], "lost": row["acked_lost"], "lost_after_promotion": row["acked_lost_after_promotion"],
        "twice": row["twice"], "longest_gap_s": row["longest_gap_s"],
        "sentinel_commands": row["sentinel_commands"], "errors": row["failed_kinds"],
    }


import rq_worker  # noqa: E402  (after HERE is known; the worker script is also run on its own)

FRAMEWORKS: Dict[str, Callable[[Any, str, str, str], Dict[str, Any]]] = {
    "redis-py": redis_py,
    "redis.asyncio": redis_asyncio,
    "django": django_cache,
    "rq": rq,
    "celery": celery,
}
