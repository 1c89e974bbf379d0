"""A kombu transport (Celery's Redis broker) whose connections go where sentinel_recovery says.

Celery settings (kombu takes a transport given as ``module:Class`` only from ``broker_transport``;
a URL's scheme must be one of kombu's own aliases, and kombu reads ``redis+sentinel://`` as its
plain ``redis`` transport, so the URL goes into the transport options)::

    broker_transport = "sentinel_recovery.redis_py.kombu:Transport"
    broker_transport_options = {"url": "redis+sentinel://s1:26379,s2:26379/mymaster"}
    # credentials: broker_user / broker_password (Celery masks these in reports; it does not
    # mask the transport options)

Everything else is kombu's Redis transport: queues are lists, BRPOP consumes them, fanout runs on
pub/sub, ack emulation keeps unacked messages in a hash (``visibility_timeout``). What changes is
the pool: it is :class:`sentinel_recovery.redis_py.ConnectionPool`, so each connection asks the
core for the primary when it connects, no command is sent to a primary that a failover is
demoting, and a reply read from one is reported as a lost connection.

The worker's event loop watches the raw sockets of its BRPOP and pub/sub connections (kombu's
MultiChannelPoller). Those connections are never released to the pool, so the pool cannot retire
them at a failover; the poller here does, on every loop tick:

- a BRPOP connection whose node may no longer take writes sends no new BRPOP there: it is closed
  (kombu's disconnect hook takes the socket out of the loop) and the next tick reconnects through
  the core, which waits for the new primary. A BRPOP already sent is read to its end first: the
  server popped that message before the fence, when it still replicated, so dropping the reply
  would lose the message rather than keep it once;
- a pub/sub connection (Celery's broadcasts: remote control) is moved the same way, or it would
  keep listening on a demoted primary that no publisher writes to any more.

A BRPOP that ends with a lost connection or the demoted server's ``UNBLOCKED`` error is an empty
poll here, not an error: kombu would otherwise restart Celery's whole consumer for it.

Nothing that may have reached a server is sent again, except writes that mean the same twice:

- a publish whose reply is lost raises :class:`PublishOutcomeUnknown` (not a connection error,
  which kombu and Celery would answer by publishing again); a publish that failed before it was
  sent (no primary within the timeout) is still retried by Celery's ``task_publish_retry``;
- kombu's ack emulation (record a delivered message as unacked, forget it at ack) is written
  again until a primary has it, so a failover neither drops a popped message nor leaves an
  acked one to be restored after ``visibility_timeout``.

The result backend is not this transport: Celery's ``redis://`` result backend keeps its fixed
address (``sentinel://`` is redis-py's Sentinel, without fencing); see bindings-python/README.md.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator

from kombu.exceptions import KombuError
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from sentinel_recovery.redis_py import ConnectionPool, SentinelRoutedConnection, SentinelRoutedSSLConnection
from sentinel_recovery.redis_py import _RoutedMixin  # see _reply_sent_before_fence
from sentinel_recovery.redis_py._core import core_for

# kombu's connection parameters that mean "no setting": left out, so the URL's own values or the
# adapter's defaults apply instead of kombu's Nones.
_UNSET = (None, "")


def _may_write(connection: Any) -> bool:
    """Whether a connection is unconnected or its node still takes this client's writes (asks
    the core's published state: no network I/O)."""
    return connection is None or connection.routable()


@contextmanager
def _reply_sent_before_fence(connection: Any) -> Iterator[None]:
    """Lets the next reply on `connection` through although its node is being demoted: the
    adapter's connection refuses such replies, which is right for a write the application
    waits on, but a BRPOP's reply carries a message its server already popped (see
    Channel._brpop_read). The adapter has no public switch for one reply yet, so this reads it
    with the method its connection class overrides."""
    connection.read_response = super(_RoutedMixin, connection).read_response
    try:
        yield
    finally:
        del connection.read_response


# How long kombu's bookkeeping writes keep trying for a primary after losing theirs (a kill -9
# takes sentinels' down-after plus an election): past it, kombu's own error handling takes over.
BOOKKEEPING_RETRY_S = 15.0


def _until_written(call: Callable[[], Any]) -> Any:
    """Runs an idempotent write until it succeeds, for up to BOOKKEEPING_RETRY_S: after a lost
    connection or a fenced reply the first attempt may or may not have been applied, and sending
    it again means the same either way. Each attempt asks the core for the primary afresh."""
    deadline = time.monotonic() + BOOKKEEPING_RETRY_S
    while True:
        try:
            return call()
        except (RedisConnectionError, RedisTimeoutError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


class PublishOutcomeUnknown(KombuError):
    """A message was sent but its reply was lost (the connection broke, or the reply came from a
    primary that a failover began to demote): the server may keep it or discard it, nobody can
    tell. Not a connection error on purpose: kombu and Celery publish again after those, which
    runs the task twice whenever the first copy survived. The application decides."""


class QoS(kombu_redis.QoS):
    """kombu's ack emulation. Its two writes per message (record as unacked when delivered,
    forget when acked) set and delete one field under the delivery tag, so sending one again is
    safe. kombu sends each once: a record lost with its primary (or read back fenced) drops a
    message already popped from the queue, and an ack lost that way leaves the message to be
    restored and run again. Here both are sent until a primary has them."""

    def append(self, message: Any, delivery_tag: Any) -> None:
        _until_written(lambda: super(QoS, self).append(message, delivery_tag))

    def ack(self, delivery_tag: Any) -> None:
        _until_written(lambda: super(QoS, self).ack(delivery_tag))


class MultiChannelPoller(kombu_redis.MultiChannelPoller):
    """kombu's poller, plus moving the held BRPOP and pub/sub connections after a failover."""

    def on_poll_start(self) -> None:
        for channel in self._channels:
            channel.retire_demoted_connections()
        super().on_poll_start()


class Channel(kombu_redis.Channel):
    """kombu's Redis channel with a pool from the core's topology."""

    QoS = QoS

    #: The sentinel_recovery URL (``redis+sentinel://...``), from ``transport_options["url"]``.
    url = None

    from_transport_options = kombu_redis.Channel.from_transport_options + ("url",)

    # TLS, like everything about where and how to connect, comes from the URL
    # (``rediss+sentinel://`` or ``data_tls``); kombu's ssl options do not apply (see _get_pool).
    connection_class = SentinelRoutedConnection
    connection_class_ssl = SentinelRoutedConnection

    def _sentinel_recovery_url(self) -> str:
        url = self.url
        if not url:
            raise ValueError(
                "sentinel_recovery.redis_py.kombu needs the sentinel URL in the transport options: "
                "broker_transport_options = {'url': 'redis+sentinel://host:port,.../service'}"
            )
        if not isinstance(url, str) or "+sentinel://" not in url:
            # Say which option is wrong without repeating it (it may hold a password).
            raise ValueError(
                "transport option 'url' must be a redis+sentinel:// (or valkey+sentinel://, "
                "rediss+sentinel://) URL"
            )
        hostname = self.connection.client.hostname
        if hostname and "://" in hostname:
            raise ValueError(
                "sentinel_recovery.redis_py.kombu takes its address from transport option 'url' "
                "only; leave broker_url unset (it names another broker)"
            )
        return url

    def _pool_kwargs(self, asynchronous: bool) -> Dict[str, Any]:
        params = self._connparams(asynchronous=asynchronous)
        # Where to connect is the core's decision, not kombu's hostname and port.
        params.pop("host", None)
        params.pop("port", None)
        # kombu's virtual host defaults to db 0; the URL's `db` wins unless a virtual host was given.
        vhost = self.connection.client.virtual_host
        if not vhost or vhost == "/":
            params.pop("db", None)
        return {k: v for k, v in params.items() if v not in _UNSET}

    def _get_pool(self, asynchronous: bool = False) -> ConnectionPool:
        url = self._sentinel_recovery_url()
        # kombu derives its connection class (with the disconnect hook its event loop needs)
        # from this attribute; the URL decides whether the data nodes speak TLS.
        tls = bool(core_for(url, None).settings.get("data_tls"))
        self.connection_class = SentinelRoutedSSLConnection if tls else SentinelRoutedConnection
        pool = ConnectionPool.from_url(url, **self._pool_kwargs(asynchronous))
        db = pool.connection_kwargs.get("db") or 0
        self.keyprefix_fanout = self.keyprefix_fanout.format(db=db)
        return pool

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        """Publishes like kombu (LPUSH, and PEXPIRE of the priority lists for queues with
        x-expires), but sent and read on one connection held here, so that a lost reply is told
        apart from a failed send: kombu and Celery publish again after any connection error,
        which runs the task twice when the first copy survived. A failed send (nothing reached
        a server, e.g. no primary within the timeout) is still theirs to retry; a lost reply
        raises PublishOutcomeUnknown. Batches (kombu's publish batches) stay kombu's."""
        if kwargs.get("_publish_batch") is not None:
            return super()._put(queue, message, **kwargs)
        key = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        commands = [("LPUSH", key, dumps(message))]
        if self._expires and queue in self._expires:
            commands += [("PEXPIRE", self._q_for_pri(queue, p), self._expires[queue]) for p in self.priority_steps]
        if self.global_keyprefix:
            commands = [(name, self.global_keyprefix + k, *rest) for name, k, *rest in commands]
        pool = self.pool
        connection = pool.get_connection() if kombu_redis._REDIS_GET_CONNECTION_WITHOUT_ARGS else pool.get_connection("LPUSH")
        try:
            connection.send_packed_command(connection.pack_commands(commands))
            try:
                for _ in commands:
                    connection.read_response()
            except ResponseError:
                connection.disconnect()  # the replies after an error reply are still unread
                raise
            except (RedisConnectionError, RedisTimeoutError) as e:
                connection.disconnect()
                raise PublishOutcomeUnknown(
                    f"published to queue {queue!r} but its reply was lost ({e}); the message may or "
                    "may not be in the queue (not sent again, so the task cannot run twice)"
                ) from None
        finally:
            pool.release(connection)

    def retire_demoted_connections(self) -> None:
        """Closes the held BRPOP connection (when no BRPOP is in flight on it) and the pub/sub
        connection if their node no longer takes writes; kombu's disconnect hook unregisters
        their sockets and the poller reconnects them through the core."""
        client = self.__dict__.get("client")  # only if kombu has made it
        connection = getattr(client, "connection", None)
        if not self._in_poll and not _may_write(connection):
            connection.disconnect()
        subclient = self.__dict__.get("subclient")
        connection = getattr(subclient, "connection", None)
        if not _may_write(connection):
            self._in_listen = None
            connection.disconnect()

    def _brpop_start(self, timeout: Any = None) -> Any:
        # Never send a BRPOP to a node being demoted: the next tick reconnects instead.
        if not _may_write(self.client.connection):
            self.client.connection.disconnect()
            return None
        return super()._brpop_start(timeout)

    def _brpop_read(self, **options: Any) -> Any:
        connection = self.client.connection
        try:
            with _reply_sent_before_fence(connection):
                return super()._brpop_read(**options)
        except self.connection_errors:
            # kombu has already dropped the connection and its socket; the next tick reconnects.
            raise kombu_redis.Empty() from None
        except ResponseError as e:
            # A primary turned replica unblocks its BRPOPs with "UNBLOCKED ... (master -> replica?)".
            if not str(e).startswith("UNBLOCKED"):
                raise
            connection.disconnect()
            raise kombu_redis.Empty() from None


class Transport(kombu_redis.Transport):
    """kombu's Redis transport over sentinel_recovery (see the module docstring for Celery)."""

    Channel = Channel
    driver_type = "redis"
    driver_name = "sentinel_recovery"

    # The URL lives in the transport options: kombu must not parse a broker_url for it.
    can_parse_url = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cycle = MultiChannelPoller()

    def as_uri(self, uri: Any, include_password: bool = False, mask: str = "**") -> str:
        """The URL Celery prints (worker banner, reports): the transport option's, without its
        userinfo and query (both may hold passwords) unless `include_password`."""
        url = str(self.client.transport_options.get("url") or "")
        if include_password:
            return url
        scheme, _, rest = url.partition("://")
        rest, _, query = rest.partition("?")
        hosts, slash, path = rest.partition("/")
        if "@" in hosts:
            hosts = mask + "@" + hosts.rpartition("@")[2]
        return f"{scheme}://{hosts}{slash}{path}" + (f"?{mask}" if query else "")
