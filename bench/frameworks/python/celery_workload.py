"""The Celery workload: a real `celery worker` (prefork pool, 2 processes) consumes tasks that
each record their id in an execution log, while this process publishes tasks one by one through
a kill -9 of the primary or a planned SENTINEL FAILOVER. Used by bindings-python/tests/
test_celery.py and bench/frameworks/python/run.py.

The worker process imports this module (`celery -A celery_workload`) and builds its app from the
JSON in $SR_CELERY_CONFIG, so the publisher and the worker share one configuration.

Brokers:
- "adapter": sentinel_recovery's kombu transport (the settings users write, see BROKERS).
- "kombu-sentinel": kombu's own Sentinel transport (`sentinel://...` with `master_name`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Optional

from celery import Celery

from failover_workload import (
    Acks,
    ExecutionLog,
    PromotionWatch,
    inject,
    sentinel_commands,
    sentinel_ports,
    tally,
    wait_settled,
)

HERE = Path(__file__).resolve().parent
BROKERS = ("adapter", "kombu-sentinel")
TASK = "celery_workload.record"


def broker_settings(broker: str, info: Dict[str, Any]) -> Dict[str, Any]:
    """Celery settings for `broker` on the topology described by `info` (sr-topology's JSON)."""
    if broker == "adapter":
        return {
            "broker_transport": "sentinel_recovery.redis_py.kombu:Transport",
            "broker_transport_options": {"url": info["url"]},
        }
    if broker == "kombu-sentinel":
        return {
            "broker_url": ";".join(f"sentinel://127.0.0.1:{p}" for p in sentinel_ports(info)),
            "broker_transport_options": {"master_name": info["service"]},
        }
    raise ValueError(f"unknown broker {broker!r} (expected one of {', '.join(BROKERS)})")


def make_app(settings: Dict[str, Any], log_path: str, task_s: float = 0.0) -> Celery:
    app = Celery("celery_workload")
    app.conf.update(
        settings,
        task_ignore_result=True,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
    )
    log = ExecutionLog(log_path)

    @app.task(name=TASK)
    def record(item: str) -> None:
        # Each task takes `task_s`, so tasks published faster than two processes run them wait
        # in the queue: a failover then finds work in the old primary's lists, as in production.
        if task_s:
            time.sleep(task_s)
        log.record(item)

    return app


# The worker's app (celery -A celery_workload): built only inside a worker started by Worker.
app: Optional[Celery] = None
if os.environ.get("SR_CELERY_CONFIG"):
    _config = json.loads(os.environ["SR_CELERY_CONFIG"])
    app = make_app(_config["settings"], _config["log"], _config["task_s"])


class Worker:
    """`celery worker --pool prefork --concurrency 2` in a process group of its own; stopped by
    that group (TERM, then KILL after a grace period), also when the caller fails."""

    def __init__(self, settings: Dict[str, Any], log_path: str, out_path: str, task_s: float) -> None:
        env = dict(os.environ)
        env["SR_CELERY_CONFIG"] = json.dumps({"settings": settings, "log": log_path, "task_s": task_s})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH", "")) if p)
        self._out = open(out_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "celery_workload", "worker", "--pool", "prefork",
             "--concurrency", "2", "--without-gossip", "--without-mingle", "--loglevel", "WARNING"],
            cwd=str(HERE), env=env, stdout=self._out, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        else:  # the main process is gone; its pool children may not be
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self._out.close()


def run(topology: Any, broker: str, scenario: str, workdir: str, before_s: float = 1.0,
        after_s: float = 1.5, interval_s: float = 0.003, task_s: float = 0.03) -> Dict[str, Any]:
    """Publishes tasks from this process before, during and after `scenario` and counts what the
    worker executed. Returns the tally as a dict with the broker, the scenario and the sentinel
    commands served during the run."""
    settings = broker_settings(broker, topology.info)
    ports = sentinel_ports(topology.info)
    # The sentinels' own traffic (pings, hellos, INFO to each other), before any client starts:
    # subtracted from the run's count so the figure is what the clients asked.
    idle_start, idle_t0 = sentinel_commands(ports), time.monotonic()
    time.sleep(1.0)
    idle_rate = (sentinel_commands(ports) - idle_start - len(ports)) / (time.monotonic() - idle_t0)
    log_path = os.path.join(workdir, f"celery-{broker}-{scenario}.log")
    worker = Worker(settings, log_path, os.path.join(workdir, f"celery-{broker}-{scenario}.out"), task_s)
    log = ExecutionLog(log_path)
    producer = make_app(settings, log_path)
    watch = PromotionWatch(ports)
    try:
        # Ready when a first task has run: the worker consumes and the publisher is connected.
        warm = f"warm-{uuid.uuid4().hex[:8]}"
        producer.send_task(TASK, args=[warm])
        wait_settled(lambda: 0 if log.counts().get(warm) else 1, quiet_s=60, limit_s=60)
        if not log.counts().get(warm):
            raise AssertionError(f"the Celery worker ran no task within 60 s; see {workdir}")
        acks = Acks()
        commands_before, t_before = sentinel_commands(ports), time.monotonic()
        n = 0

        def send_for(seconds: float) -> None:
            nonlocal n
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                item = f"t{n}"
                n += 1
                acks.send(item, lambda: producer.send_task(TASK, args=[item]))
                time.sleep(interval_s)

        send_for(before_s)
        fault: Dict[str, Any] = {}
        injector = threading.Thread(target=lambda: fault.update(zip(("at", "new"), inject(topology, scenario))))
        injector.start()
        while injector.is_alive():
            send_for(0.05)
        send_for(after_s)
        commands = sentinel_commands(ports) - commands_before - idle_rate * (time.monotonic() - t_before)
        wait_settled(lambda: sum(1 for i in acks.acked if not log.counts().get(i)), quiet_s=4, limit_s=30)
        # Celery's remote control goes over pub/sub (kombu's fanout): the worker must still hear
        # it after the failover (a demoted primary relays PUBLISH as a replica, so an answer
        # does not say which node the worker listens on).
        try:
            pings = len(producer.control.ping(timeout=3.0))
        except Exception:  # a broker error is an answer too: no reply
            pings = 0
        t = tally(acks, log.counts(), watch.at)
        row = {"broker": broker, "scenario": scenario, **t.row(),
               "sentinel_commands": max(0, round(commands)),
               "promotion_seen": watch.at is not None, "control_ping_replies": pings,
               "failed_kinds": sorted(set(acks.failed.values()))}
        return row
    finally:
        watch.close()
        worker.stop()
        try:
            producer.close()
        except Exception:  # closing a pool to a dead node may raise; nothing to keep
            pass
