"""The redis-py adapter (sentinel_recovery.redis_py) on real servers: discovery, clients, from_url,
bad input, no retries by default, fencing at a planned failover, WATCH across a failover, fork."""

from __future__ import annotations

import multiprocessing
import threading
import uuid

import pytest

redis = pytest.importorskip("redis")

import sentinel_recovery as sr  # noqa: E402
from conftest import Topology, wait_until  # noqa: E402
from sentinel_recovery.redis_py import ConnectionPool, MasterNotFoundError, Sentinel  # noqa: E402


def _ports(nodes) -> set:
    return {int(n["port"]) for n in nodes}


def test_discover_master_slaves_and_clients(topology: Topology) -> None:
    sentinel = Sentinel(topology.url)
    assert sentinel.discover_master(topology.service) == ("127.0.0.1", topology.primary_port)
    wait_until(
        lambda: {p for _, p in sentinel.discover_slaves(topology.service)} == _ports(topology.info["replicas"]),
        20,
        "both replicas in the core's topology",
    )
    master = sentinel.master_for(topology.service, socket_timeout=5, decode_responses=True)
    key = f"py:rp:{uuid.uuid4().hex}"
    assert master.set(key, "v") is True
    assert master.get(key) == "v"
    assert master.connection_pool.get_connection().port == topology.primary_port

    reads = Sentinel(topology.url, read_from="replica").slave_for(topology.service, socket_timeout=5)
    connection = reads.connection_pool.get_connection()
    try:
        assert connection.port in _ports(topology.info["replicas"])
        wait_until(lambda: reads.get(key) == b"v", 10, "the write replicated to the replica read")
    finally:
        reads.connection_pool.release(connection)


def test_from_url_builds_a_pool_with_redis_py_kwargs(topology: Topology) -> None:
    pool = ConnectionPool.from_url(topology.url, socket_timeout=5, decode_responses=True, max_connections=4)
    r = redis.Redis(connection_pool=pool)
    key = f"py:rp:{uuid.uuid4().hex}"
    assert r.set(key, "x") and r.get(key) == "x"
    assert pool.max_connections == 4
    assert "mymaster" in repr(pool)


def test_bad_input_gives_clear_errors(topology: Topology) -> None:
    with pytest.raises(ValueError, match="redis\\+sentinel://"):
        ConnectionPool.from_url(f"redis://127.0.0.1:{topology.primary_port}/0")
    with pytest.raises(ValueError, match="host="):
        ConnectionPool.from_url(topology.url, host="127.0.0.1")
    with pytest.raises(ValueError, match="client_name=: differs"):
        ConnectionPool.from_url(topology.url + "?client_name=a", client_name="b")
    with pytest.raises(ValueError, match="ssl="):
        ConnectionPool.from_url(topology.url, ssl=True)
    with pytest.raises(TypeError, match="connection_class"):
        ConnectionPool.from_url(topology.url, connection_class=redis.connection.Connection)
    with pytest.raises(sr.ConfigError):
        ConnectionPool.from_url(topology.url + "?command_timeout_ms=soon")
    sentinel = Sentinel(topology.url)
    with pytest.raises(ValueError, match="'other'.*'mymaster'"):
        sentinel.discover_master("other")
    with pytest.raises(ValueError, match="'other'"):
        sentinel.master_for("other")


def test_no_primary_within_the_timeout_is_master_not_found(refusing_port: int) -> None:
    url = f"redis+sentinel://127.0.0.1:{refusing_port}/mymaster"
    sentinel = Sentinel(url, connection_kwargs={"socket_connect_timeout": 0.3})
    with pytest.raises(MasterNotFoundError, match="no primary of 'mymaster' within 0.3s"):
        sentinel.discover_master("mymaster")
    r = sentinel.master_for("mymaster")
    with pytest.raises(redis.ConnectionError, match="no usable primary") as e:
        r.ping()
    assert not isinstance(e.value, redis.TimeoutError)


def _killed_after_apply(r: "redis.Redis", port: int, key: str) -> None:
    """RPUSH is applied, then the connection is killed while the pipeline waits in BLPOP: the
    pipeline fails with a connection error after its write reached the server."""
    killer = redis.Redis(port=port, socket_timeout=5)

    def kill_when_blocked() -> None:
        blocked = wait_until(
            lambda: [c["id"] for c in killer.client_list() if c["cmd"] == "blpop"],
            10,
            "the pipeline blocked in BLPOP",
        )
        killer.client_kill_filter(_id=blocked[0])

    thread = threading.Thread(target=kill_when_blocked, daemon=True)
    thread.start()
    try:
        pipe = r.pipeline(transaction=False)
        pipe.rpush(key, "once")
        pipe.blpop([key + ":never"], timeout=3)
        pipe.execute()
    finally:
        thread.join(15)
        killer.close()


def test_no_retries_by_default(topology: Topology) -> None:
    key = f"py:rp:retry:{uuid.uuid4().hex}"
    pool = Sentinel(topology.url).master_for(topology.service, socket_timeout=5).connection_pool
    r = redis.Redis(connection_pool=pool)
    with pytest.raises(redis.ConnectionError):
        _killed_after_apply(r, topology.primary_port, key)
    assert r.llen(key) == 1, "the adapter re-sent a pipeline that had reached the server"
    # The same with redis-py's own defaults re-sends it (>= 6): the scenario does what it says.
    if int(redis.__version__.split(".")[0]) >= 6:
        plain = redis.Redis(port=topology.primary_port, socket_timeout=5)
        plain_key = key + ":plain"
        try:
            _killed_after_apply(plain, topology.primary_port, plain_key)
        except redis.ConnectionError:
            pass
        assert plain.llen(plain_key) >= 2


def test_planned_failover_fences_sends_and_breaks_watch(fresh_topology) -> None:
    t = fresh_topology()
    old = t.primary_port
    sentinel = Sentinel(t.url)
    core = sentinel._core
    pool = sentinel.master_for(t.service, socket_timeout=5).connection_pool
    # One connection held by a client (in use), one WATCHing, one idle in the pool.
    single = redis.Redis(connection_pool=pool, single_connection_client=True)
    single.set("py:rp:before", "1")
    pipe = redis.Redis(connection_pool=pool).pipeline()
    pipe.watch("py:rp:watched")
    idle = pool.get_connection()
    pool.release(idle)
    assert single.connection.port == pipe.connection.port == idle.port == old

    t.cmd("failover")
    wait_until(lambda: not core.is_routable("127.0.0.1", old, True), 30, "the core fencing the old primary")
    # Issued while the promotion runs: waits for it, then goes to the new primary only.
    assert single.set("py:rp:during", "2") is True
    new = t.cmd(f"wait-primary-not {old} 30000", timeout=40)["port"]
    assert single.connection.port == new != old
    with redis.Redis(port=new) as direct:
        assert direct.get("py:rp:during") == b"2"

    pipe.multi()
    pipe.set("py:rp:watched", "x")
    with pytest.raises(redis.WatchError):
        pipe.execute()
    # The idle connection to the old primary is closed without anyone touching the pool.
    wait_until(lambda: idle._sock is None, 10, "the idle connection to the old primary closed")


@pytest.mark.parametrize("how", ["failover", "kill9", "pause"])
def test_a_subscriber_read_on_its_own_thread_follows_a_failover(fresh_topology, how: str) -> None:
    """RQ's worker pattern: ``PubSub.run_in_thread`` reads on one thread while the main thread
    sends (UN)SUBSCRIBE. Sent while a planned failover is demoting the primary, UNSUBSCRIBE goes
    where the subscriptions are: moving it reconnected the socket under the reading thread, both
    threads then connected and read each other's handshake, UNSUBSCRIBE failed after 5 s and the
    healthy new primary was reported unusable (RQ's worker hung in teardown). The subscriber
    moves when its stream ends: the pool shuts its socket down at the core's events, and the
    reading thread reconnects through the core and subscribes again on the new primary. With the
    old primary paused (a stalled VM, a partition) nothing else would ever end that stream."""
    t = fresh_topology()
    old = t.primary_port
    sentinel = Sentinel(t.url)
    r = sentinel.master_for(t.service, socket_timeout=5)
    run = uuid.uuid4().hex[:8]
    kept, dropped = f"py:rp:kept:{run}", f"py:rp:dropped:{run}"
    received: list = []
    errors: list = []
    p = r.pubsub()
    p.subscribe(**{kept: lambda m: received.append(m["data"]), dropped: lambda m: None})

    def on_error(e: BaseException, pubsub, thread) -> None:
        errors.append(e)
        if not isinstance(e, redis.ConnectionError):
            raise e

    reader = p.run_in_thread(sleep_time=0.5, daemon=True, exception_handler=on_error)
    try:
        t.cmd({"failover": "failover", "kill9": f"kill9 {old}", "pause": f"stop {old}"}[how])
        if how == "failover":
            wait_until(lambda: not sentinel._core.is_routable("127.0.0.1", old, True), 30, "the core fencing the old primary")
            p.unsubscribe(dropped)  # at once: before Sentinel converts the old primary
        new = t.cmd(f"wait-primary-not {old} 30000", timeout=40)["port"]
        with redis.Redis(port=new) as direct:
            sent: list = []

            def delivered() -> bool:
                sent.append(f"m{len(sent)}".encode())
                direct.publish(kept, sent[-1])
                return bool(received)

            wait_until(delivered, 30, "a message published on the new primary reaching the subscriber", interval=0.2)
        assert set(received) <= set(sent), received
        p.unsubscribe()  # after kill -9 only now: both threads reconnecting a broken socket at once is redis-py's own race
    finally:
        reader.stop(timeout=5)
        p.close()
        if how == "pause":
            t.cmd(f"cont {old}")
    assert not reader.is_alive()
    assert all(isinstance(e, redis.ConnectionError) for e in errors), errors
    if how != "kill9":
        # Only the end of the stream (the pool's shutdown, or Sentinel closing the demoted
        # primary's subscribers), never the two threads' race.
        assert all("closed by server" in str(e) for e in errors), [str(e) for e in errors]


def test_a_reply_read_after_the_fence_began_is_an_error_not_a_success(fresh_topology) -> None:
    """The reply check alone: a SET sent to the primary before any fence, answered only after
    the failover began demoting it (the primary was paused past down-after, as in a stalled VM),
    must not come back as a success: the promoted replica never got that write."""
    t = fresh_topology()
    old = t.primary_port
    sentinel = Sentinel(t.url)
    core = sentinel._core
    r = sentinel.master_for(t.service, socket_timeout=30)
    r.set("py:rp:late", "0")
    t.cmd(f"stop {old}")
    outcome: list = []

    def late_write() -> None:
        try:
            outcome.append(r.set("py:rp:late", "1"))
        except BaseException as e:  # what the caller of redis-py gets
            outcome.append(e)

    writer = threading.Thread(target=late_write)
    try:
        writer.start()
        # Sent before the fence: the core still routes writes to the paused primary.
        wait_until(lambda: core.is_fenced("127.0.0.1", old), 30, "the failover fencing the paused primary")
    finally:
        t.cmd(f"cont {old}")
    writer.join(40)
    assert len(outcome) == 1, outcome
    assert isinstance(outcome[0], redis.ConnectionError), outcome
    assert "may be discarded" in str(outcome[0]) or "demot" in str(outcome[0]), outcome


def _child_uses_inherited(r: "redis.Redis", port: int, out) -> None:
    try:
        r.set("py:rp:fork", "child")
        conn = r.connection_pool.get_connection()
        out.put(("ok", r.get("py:rp:fork"), conn.port == port))
    except BaseException as e:
        out.put(("error", repr(e), None))


def test_forked_child_routes_through_the_core(topology: Topology) -> None:
    r = Sentinel(topology.url).master_for(topology.service, socket_timeout=5)
    r.set("py:rp:fork", "parent")
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_uses_inherited, args=(r, topology.primary_port, out))
    child.start()
    result = out.get(timeout=40)
    child.join(30)
    assert result == ("ok", b"child", True), result
    assert r.get("py:rp:fork") == b"child"
