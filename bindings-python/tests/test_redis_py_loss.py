"""Acknowledged writes through a failover: 8 threads RPUSH unique ids through the adapter and 8
through redis-py's own Sentinel, side by side in one run, through a planned SENTINEL FAILOVER and
a kill -9 of the primary. The adapter must lose nothing it acknowledged after the promotion began
and apply nothing twice; redis-py's numbers are printed, not asserted."""

from __future__ import annotations

import json
import uuid

import pytest

redis = pytest.importorskip("redis")

from redis_py_load import Writers, final_read, redis_py_sentinel, through_failover  # noqa: E402
from sentinel_recovery.redis_py import Sentinel  # noqa: E402


@pytest.mark.parametrize("how", ["failover", "kill9"])
def test_no_acknowledged_write_lost_after_the_promotion_began(fresh_topology, how: str) -> None:
    t = fresh_topology()
    run = uuid.uuid4().hex[:8]
    adapter = Writers("adapter", Sentinel(t.url).master_for(t.service, socket_timeout=5), f"py:loss:{run}:adapter")
    own = Writers(
        "redis-py Sentinel", redis_py_sentinel(t).master_for(t.service, socket_timeout=1.0), f"py:loss:{run}:redis-py"
    )
    clock, new = through_failover(t, how, [adapter, own])
    assert clock.began is not None
    results = [w.judge(final_read(new, w.key), clock.began) for w in (adapter, own)]
    for r in results:
        print(f"[{how}] " + json.dumps(r, sort_keys=True))
    mine = results[0]
    assert mine["acked_after_promotion_began"] > 0
    assert mine["lost_after_promotion_began"] == 0, mine
    assert mine["applied_twice"] == 0, mine
