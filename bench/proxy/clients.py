"""The plain redis-py programs of the proxy benchmark (bench/proxy/bench.py runs them as child
processes, so their GIL and their CPU are not the orchestrator's). redis-py only: no Sentinel code,
no retries, as an unchanged application would point it at one address.

    python clients.py getloop HOST PORT N
        N sequential GETs of `key:__rand_int__` on one connection; prints one JSON line
        {"n", "p50_us", "mean_us", "p99_us"} (time per call, measured around each call).
    python clients.py writers HOST PORT THREADS LOG STOPFILE
        THREADS threads, each with its own client (retry=None: no retries; retry_on_timeout
        False; socket timeouts 1 s), SADD of unique values `p<T>-<n>` to `partitions:set` in a
        tight loop until STOPFILE exists. A failed call is logged, the client reconnects on its
        next call (after a 10 ms pause, so a refused connection does not spin). At the end, one
        JSON line per call in LOG, in the format of the testkit's `sr-set-writer`:
        {"w", "v", "t0", "t1" (ms since the epoch), "outcome": ok|fail|info, "reply", "err"}.
    python clients.py idle HOST PORT N
        Opens N connections, one PING on each (so a proxy has its upstream open), prints
        `ready N` and keeps them open, idle, until stdin closes.
"""
import json
import os
import socket
import statistics
import sys
import threading
import time

import redis

KEY = "partitions:set"  # the key the testkit's sr-set-writer adds to
GET_KEY = "key:__rand_int__"  # the key redis-benchmark -t get reads without -r
TIMEOUT = 1.0
ERROR_PAUSE = 0.010


def plain_client(host: str, port: int) -> redis.Redis:
    r = redis.Redis(host=host, port=port, socket_timeout=TIMEOUT,
                    socket_connect_timeout=TIMEOUT, retry=None)
    retries = r.connection_pool.connection_kwargs["retry"]
    conn = r.connection_pool.get_connection()
    try:
        # retry=None with no retry_on_error gives Retry(NoBackoff(), 0) on the connection.
        assert conn.retry.get_retries() == 0, "redis-py would retry"
        assert retries is None or retries.get_retries() == 0
    finally:
        r.connection_pool.release(conn)
    return r


def getloop(host: str, port: str, n: str) -> None:
    r = plain_client(host, int(port))
    r.get(GET_KEY)  # connect outside the timed loop
    times = []
    clock = time.perf_counter_ns
    get = r.get
    for _ in range(int(n)):
        t0 = clock()
        get(GET_KEY)
        times.append(clock() - t0)
    times.sort()
    print(json.dumps({"n": len(times), "p50_us": times[len(times) // 2] / 1000,
                      "mean_us": statistics.fmean(times) / 1000,
                      "p99_us": times[int(len(times) * 0.99)] / 1000}))


def writers(host: str, port: str, threads: str, log_path: str, stop_path: str) -> None:
    stop = threading.Event()
    logs = []

    def work(wid: str) -> None:
        r = plain_client(host, int(port))
        out = []
        logs.append(out)
        n = 0
        while not stop.is_set():
            n += 1
            v = f"{wid}-{n}"
            t0 = time.time()
            outcome, reply, err = "ok", None, None
            try:
                reply = r.sadd(KEY, v)
            except redis.exceptions.ResponseError as e:
                # An error reply: refused (READONLY, NOREPLICAS ...) or, from our proxy,
                # UNCERTAIN (may or may not have been applied): never acknowledged.
                # (redis-py turns known codes into classes: READONLY is ReadOnlyError.)
                text = str(e)
                outcome = "info" if text.startswith("UNCERTAIN") else "fail"
                err = f"{type(e).__name__}: {text}"
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as e:
                # May have reached the server before the connection failed.
                outcome, err = "info", f"{type(e).__name__}: {e}"
            t1 = time.time()
            out.append((wid, v, t0 * 1000, t1 * 1000, outcome, reply, err))
            if outcome != "ok":
                time.sleep(ERROR_PAUSE)

    ts = [threading.Thread(target=work, args=(f"p{i}",), daemon=True) for i in range(int(threads))]
    for t in ts:
        t.start()
    while not os.path.exists(stop_path):
        time.sleep(0.02)
    stop.set()
    for t in ts:
        t.join()
    with open(log_path, "w") as f:
        for out in logs:
            for w, v, t0, t1, outcome, reply, err in out:
                f.write(json.dumps({"w": w, "v": v, "t0": round(t0, 3), "t1": round(t1, 3),
                                    "outcome": outcome, "reply": reply, "err": err}) + "\n")


def idle(host: str, port: str, n: str) -> None:
    socks = []
    for _ in range(int(n)):
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"PING\r\n")
        socks.append(s)
    for s in socks:
        got = b""
        while not got.endswith(b"\r\n"):
            chunk = s.recv(64)
            if not chunk:
                sys.exit("idle: connection closed before PONG")
            got += chunk
        if got != b"+PONG\r\n":
            sys.exit(f"idle: unexpected reply {got!r}")
    print(f"ready {len(socks)}", flush=True)
    sys.stdin.read()
    for s in socks:
        s.close()


if __name__ == "__main__":
    cmds = {"getloop": (getloop, 3), "writers": (writers, 5), "idle": (idle, 3)}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds or len(sys.argv) - 2 != cmds[sys.argv[1]][1]:
        sys.exit(__doc__)
    fn, _ = cmds[sys.argv[1]]
    fn(*sys.argv[2:])
