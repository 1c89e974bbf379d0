"""N sequential commands (SET and GET alternating, 16-byte values) through one redis-py client,
after 500 untimed ones: ``direct PORT N`` talks to the primary itself, ``adapter URL N`` goes
through sentinel_recovery.redis_py. Both with socket_timeout=5 (the same socket settings, so the
same system calls). Run by callgrind.sh, which subtracts two runs' counts so start-up, connect
and close cancel."""

import sys

import redis


def main() -> None:
    kind, where, count = sys.argv[1:4]
    n = int(count)
    if kind == "direct":
        client = redis.Redis(port=int(where), socket_timeout=5)
    elif kind == "adapter":
        from sentinel_recovery.redis_py import Sentinel

        sentinel = Sentinel(where)
        client = sentinel.master_for(sentinel._core.service, socket_timeout=5)
    else:
        raise SystemExit("usage: seq.py direct PORT N | adapter URL N")
    value = "0123456789abcdef"

    def run(k: int) -> None:
        for i in range(k):
            if i % 2 == 0:
                client.set(f"seq:{i % 64}", value)
            else:
                client.get(f"seq:{i % 64}")

    run(500)
    run(n)
    client.close()


if __name__ == "__main__":
    main()
