"""The partition scenarios' writer with redis-py's own Sentinel client
(`redis.sentinel.Sentinel(...).master_for(...)`), same protocol and history as the testkit's
`sr-set-writer`: SADD of unique values `<ID>-<n>` to `partitions:set`, one JSON line per call.

Usage: python redis_py_writer.py URL ID LOG STOPFILE
(URL: redis+sentinel://host:port,host:port/service, as the testkit hands every writer.)
"""
import json
import os
import sys
import time

import redis
from redis.sentinel import MasterNotFoundError, Sentinel

KEY = "partitions:set"
PAUSE = 0.010
# Timeouts of the same order as sentinel-recovery's defaults, so neither side waits longer.
SOCKET_TIMEOUT = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


def parse(url: str):
    rest = url.split("://", 1)[1]
    hosts, tail = rest.split("/", 1)
    service = tail.split("?", 1)[0]
    addrs = [(h.rsplit(":", 1)[0], int(h.rsplit(":", 1)[1])) for h in hosts.split(",")]
    return addrs, service


def main(url: str, wid: str, log_path: str, stop: str) -> None:
    addrs, service = parse(url)
    sentinel = Sentinel(addrs, socket_timeout=SOCKET_TIMEOUT,
                        socket_connect_timeout=SOCKET_TIMEOUT)
    master = sentinel.master_for(service, socket_timeout=SOCKET_TIMEOUT,
                                 socket_connect_timeout=SOCKET_TIMEOUT)
    n = 0
    with open(log_path, "w", buffering=1) as log:
        while not os.path.exists(stop):
            n += 1
            v = f"{wid}-{n}"
            t0 = now_ms()
            outcome, reply, err = "ok", None, None
            try:
                reply = master.sadd(KEY, v)
            except MasterNotFoundError as e:
                # Raised before anything is sent: no sentinel named a primary.
                outcome, err = "fail", f"MasterNotFoundError: {e}"
            except redis.exceptions.ResponseError as e:
                # The server refused it (READONLY ...): not applied.
                outcome, err = "fail", f"{type(e).__name__}: {e}"
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
                # May have reached the server before the connection failed.
                outcome, err = "info", f"{type(e).__name__}: {e}"
            t1 = now_ms()
            log.write(json.dumps({"w": wid, "v": v, "t0": t0, "t1": t1, "outcome": outcome,
                                  "reply": reply, "err": err}) + "\n")
            time.sleep(PAUSE)


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit("usage: redis_py_writer.py URL ID LOG STOPFILE")
    main(*sys.argv[1:])
