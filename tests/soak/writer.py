"""The soak's Python writer (see tests/src/bin/sr-soak/writer.rs for the loop and log format).

Usage: python writer.py URL ID LOG STOPFILE READS(0|1)
"""
import asyncio
import json
import os
import sys
import time

import sentinel_recovery

ROUND_PAUSE = 0.020


def now_ms() -> int:
    return int(time.time() * 1000)


async def main(url: str, wid: str, log_path: str, stop: str, reads: bool) -> None:
    client = sentinel_recovery.Client.open(url)
    lst, counter = f"soak:l:{wid}", f"soak:c:{wid}"
    with open(log_path, "w", buffering=1) as log:

        async def call(op, v, *args):
            t0 = now_ms()
            ok, reply, err = True, None, None
            try:
                r = await client.execute(*args)
                reply = r.decode() if isinstance(r, bytes) else r
            except sentinel_recovery.Error as e:
                ok, err = False, f"{e.code}: {e}"
            t1 = now_ms()
            log.write(json.dumps({"w": wid, "op": op, "v": v, "t0": t0, "t1": t1, "ok": ok,
                                  "reply": reply, "err": err}) + "\n")

        seq = 0
        while not os.path.exists(stop):
            seq += 1
            await call("rpush", seq, "RPUSH", lst, str(seq))
            await call("incr", None, "INCR", counter)
            if reads:
                await call("get", None, "GET", counter)
            await asyncio.sleep(ROUND_PAUSE)
    await client.close()


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit("usage: writer.py URL ID LOG STOPFILE READS(0|1)")
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5] == "1"))
