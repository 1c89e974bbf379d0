"""make test-dist: the installed wheel through a kill -9 failover, in a venv with no Rust toolchain.

    python smoke.py URL EXPECTED_VERSION

Connects, SET, GET, prints READY (the test then kill -9s the primary), waits for primary_changed,
GETs again and prints OK. Exit status 0 only when all of that happened.
"""
import asyncio
import os
import sys

import sentinel_recovery as sr


async def main(url: str, version: str) -> int:
    assert sr.__version__ == version, f"version {sr.__version__} != {version}"
    package = os.path.dirname(sr.__file__)
    for name in ("py.typed", "_native.pyi"):
        assert os.path.exists(os.path.join(package, name)), f"{name} is not installed"
    key, value = "dist:python", "from the wheel"
    async with sr.Client.connect(url, decode_responses=True) as client:
        events = client.events()
        await client.execute("SET", key, value)
        got = await client.execute("GET", key)
        assert got == value, f"GET gave {got!r}"
        print("READY python", sr.__version__, flush=True)

        async def switch() -> dict:
            async for event in events:
                if event["kind"] == "primary_changed" and event.get("old"):
                    return event
            raise AssertionError("the event stream ended")

        event = await asyncio.wait_for(switch(), 90)
        print("SWITCH", event["old"], "->", event["new"], flush=True)
        got = await client.execute("GET", key)
        assert got == value, f"GET after the failover gave {got!r}"
        await events.aclose()
    print("OK python", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1], sys.argv[2])))
