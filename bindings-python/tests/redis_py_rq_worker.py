"""An RQ worker process (default Worker: forks a work-horse per job) on the redis-py adapter
(``adapter``) or on redis-py's own Sentinel (``redis-py``), for test_redis_py_rq.py.

Usage: python redis_py_rq_worker.py adapter|redis-py URL SENTINELS_JSON SERVICE QUEUE

Prints ``ready`` once the worker is built. RQ logs to stdout and stderr: give it a file, not a
pipe nobody reads (a full pipe would stop the worker in a log write). ``RQ_TEST_LOG`` sets RQ's
log level (default WARNING). SIGUSR1 dumps every thread's stack (faulthandler) to stderr, in the
worker and in its work-horses.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys


def record(done_key: str, item: str) -> str:
    """The job: appends its id to ``done_key`` through the work-horse's own connection."""
    from rq import get_current_job

    get_current_job().connection.rpush(done_key, item)
    return item


def main() -> None:
    mode, url, sentinels, service, queue_name = sys.argv[1:6]
    faulthandler.register(signal.SIGUSR1, all_threads=True)
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
    worker.work(logging_level=os.environ.get("RQ_TEST_LOG", "WARNING"), with_scheduler=False)


if __name__ == "__main__":
    main()
