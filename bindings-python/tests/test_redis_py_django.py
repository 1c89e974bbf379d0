"""Django's cache (django.core.cache.backends.redis.RedisCache) through a kill -9 and a planned
failover, with ``pool_class`` the adapter's ConnectionPool, beside the same cache on redis-py's own
Sentinel pool: sets acknowledged vs readable afterwards. The adapter must lose no set it
acknowledged after the promotion began; redis-py's numbers are printed."""

from __future__ import annotations

import json
import uuid
from typing import Any, Dict

import pytest

redis = pytest.importorskip("redis")
django = pytest.importorskip("django")

from django.conf import settings  # noqa: E402

from conftest import Topology  # noqa: E402
from redis_py_load import Writers, redis_py_sentinel, through_failover  # noqa: E402

if not settings.configured:
    settings.configure(CACHES={"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})


class RedisPySentinelPool(redis.sentinel.SentinelConnectionPool):
    """What a Django user writes today for Sentinel: redis-py's own pool behind ``pool_class``
    (LOCATION is ignored: the sentinels are set on the class by the test)."""

    topology: Topology

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "RedisPySentinelPool":
        kwargs.setdefault("socket_timeout", 1.0)
        return cls(cls.topology.service, redis_py_sentinel(cls.topology), **kwargs)


def _cache(location: str, pool_class: str, prefix: str):
    from django.core.cache.backends.redis import RedisCache

    # A list: Django splits a LOCATION string at commas, and the URL lists several sentinels.
    return RedisCache([location], {"OPTIONS": {"pool_class": pool_class, "socket_timeout": 5}, "KEY_PREFIX": prefix})


@pytest.mark.parametrize("how", ["failover", "kill9"])
def test_django_cache_through_a_failover(fresh_topology, how: str) -> None:
    t = fresh_topology()
    RedisPySentinelPool.topology = t
    run = uuid.uuid4().hex[:8]
    adapter_cache = _cache(t.url, "sentinel_recovery.redis_py.ConnectionPool", f"a{run}")
    own_cache = _cache(t.url, f"{__name__}.RedisPySentinelPool", f"o{run}")
    adapter = Writers("adapter", threads=4, write=lambda item: adapter_cache.set(item, item, timeout=None))
    own = Writers("redis-py Sentinel", threads=4, write=lambda item: own_cache.set(item, item, timeout=None))
    clock, _ = through_failover(t, how, [adapter, own], settle_acks=60)
    results: Dict[str, Dict[str, Any]] = {}
    for w, cache in ((adapter, adapter_cache), (own, own_cache)):
        keys = [item for item, _ in w.acked]
        found = cache.get_many(keys)
        results[w.name] = w.judge(list(found.values()), clock.began)
        print(f"[django {how}] " + json.dumps(results[w.name], sort_keys=True))
    mine = results["adapter"]
    assert mine["acked_after_promotion_began"] > 0
    assert mine["lost_after_promotion_began"] == 0, mine
