"""An RQ worker process (default Worker: forks a work-horse per job) on the redis-py adapter
(``adapter``) or on redis-py's own Sentinel (``redis-py``), for test_redis_py_rq.py.

Usage: python redis_py_rq_worker.py adapter|redis-py URL SENTINELS_JSON SERVICE QUEUE
"""

from __future__ import annotations

import json
import sys


def record(done_key: str, item: str) -> str:
    """The job: appends its id to ``done_key`` through the work-horse's own connection."""
    from rq import get_current_job

    get_current_job().connection.rpush(done_key, item)
    return item


def main() -> None:
    mode, url, sentinels, service, queue_name = sys.argv[1:6]
    from rq import Queue, Worker

    if mode == "adapter":
        from sentinel_recovery.redis_py import Sentinel

        connection = Sentinel(url).master_for(service, socket_timeout=5)
    else:
        from redis.sentinel import Sentinel as RedisPySentinel

        addresses = [(s["host"], int(s["port"])) for s in json.loads(sentinels)]
        connection = RedisPySentinel(addresses, socket_timeout=1.0).master_for(service, socket_timeout=1.0)
    worker = Worker([Queue(queue_name, connection=connection)], connection=connection)
    print("ready", flush=True)
    worker.work(logging_level="WARNING", with_scheduler=False)


if __name__ == "__main__":
    main()
