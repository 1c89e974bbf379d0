"""The RQ side of frameworks.rq: `connect(spec)` gives the Redis client of a mode, and run as a
script this is an RQ `Worker` process (a forked work-horse per job) on the queue "bench".

Usage: python rq_worker.py SPEC_JSON   (mode, url, service, sentinels, log; see frameworks.rq)
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict


def connect(spec: Dict[str, Any]) -> Any:
    """adapter: sentinel_recovery.redis_py's Sentinel; own: redis-py's Sentinel (RQ's own
    Sentinel support builds the same `Sentinel(...).master_for(...)`)."""
    if spec["mode"] == "adapter":
        from sentinel_recovery.redis_py import Sentinel

        return Sentinel(spec["url"]).master_for(spec["service"], socket_timeout=5)
    from redis.sentinel import Sentinel as RedisPySentinel

    sentinels = [tuple(a) for a in spec["sentinels"]]
    return RedisPySentinel(sentinels, socket_timeout=1).master_for(spec["service"], socket_timeout=1)


def record(item: str) -> str:
    """The job: notes its id in the execution log (a local file, see failover_workload)."""
    from failover_workload import ExecutionLog

    ExecutionLog(os.environ["BENCH_RQ_LOG"]).record(item)
    return item


def main() -> None:
    spec = json.loads(sys.argv[1])
    os.environ["BENCH_RQ_LOG"] = spec["log"]
    from rq import Queue, Worker

    connection = connect(spec)
    worker = Worker([Queue("bench", connection=connection)], connection=connection)
    worker.work(logging_level="WARNING", with_scheduler=False)


if __name__ == "__main__":
    main()
