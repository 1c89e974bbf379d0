"""redis-py on sentinel-recovery: keep ``redis.Redis`` and let the core decide where it connects.

Three-line setups::

    from sentinel_recovery.redis_py import Sentinel
    r = Sentinel("redis+sentinel://127.0.0.1:26379/mymaster").master_for("mymaster")
    r.set("key", "value")

    pool = ConnectionPool.from_url("redis+sentinel://127.0.0.1:26379/mymaster", socket_timeout=5)
    r = redis.Redis(connection_pool=pool)

What is promised (redis-py 5 to 8, with the adapter's defaults):

* a connection goes to the primary the core verified (``ROLE`` is checked once per new socket;
  a refused connect or a wrong role is reported to the core and the route asked again, within
  ``socket_connect_timeout``, else redis-py's ``socket_timeout``, else the URL's
  ``command_timeout_ms``);
* nothing is sent to a primary a failover has begun demoting: such a connection is closed before
  the send and the command goes to the new primary once promoted (waiting within the same
  deadline), except on a connection that carries WATCH or MULTI, which raises
  ``redis.ConnectionError`` (a Pipeline raises ``WatchError``) instead of running the EXEC on
  another server;
* a reply read from a primary that a failover began demoting is not returned: the connection is
  closed and ``redis.ConnectionError`` says the write may be discarded by the failover, so no
  write acknowledged to the application after the promotion began is lost;
* nothing is re-sent: the connections retry nothing (``retry=Retry(NoBackoff(), 0)``) unless you
  pass ``retry=`` / ``retry_on_error=``. With retries, a command whose connection broke after the
  send runs again on the new primary and may then run twice.

* a subscriber connection (``PubSub``) is not moved under its reading thread: its subscription
  commands and health-check PINGs are sent where the subscriptions are and its messages are not
  distrusted (they acknowledge no write). At the core's ``primary_changed`` the pool shuts down
  the socket of each subscriber on a node no longer routable (without closing it): the reading thread sees the end of the stream (``ConnectionError``, as when Sentinel
  closes a demoted primary's subscribers or the node dies), and redis-py's next read connects
  through the core and subscribes again on the new primary. Messages published meanwhile are
  missed: pub/sub is at-most-once. A (UN)SUBSCRIBE another thread sends just then may fail with
  ``ConnectionError``, as it may when Sentinel closes the subscriber.

Not promised: a command already on the wire to a primary that is being demoted cannot be recalled
(it may have run there, and the failover may discard it); the caller gets an error for it.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple, Type

import redis
import redis.connection
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, ReadOnlyError, ResponseError
from redis.retry import Retry
from redis.sentinel import MasterNotFoundError, SlaveNotFoundError

from .. import Error as _CoreError
from ._core import (
    MOVE,
    NAMES,
    NOTED_COMMANDS,
    Core,
    Guard,
    command_name,
    core_for,
    end_stream,
    node_text,
    remember_name,
    role_of,
)
from ._settings import ADAPTER_KEYS, merge_url_settings, no_retry_defaults

__all__ = [
    "Sentinel",
    "ConnectionPool",
    "SentinelRoutedConnection",
    "SentinelRoutedSSLConnection",
    "MasterNotFoundError",
    "SlaveNotFoundError",
]

# redis-py >= 6 connects through connect_check_health() (send_packed_command calls it directly);
# redis-py 5 through connect().
_HAS_CONNECT_CHECK_HEALTH = hasattr(redis.connection.AbstractConnection, "connect_check_health")
_DEMOTED_UNBLOCKED = "UNBLOCKED"
#: Pause between two failed connect attempts, so a node that refuses does not spin the loop
#: while the core rediscovers (the core rate-limits its own rediscovery).
_RETRY_PAUSE = 0.05


def _route_error(core: Core, primary: bool, budget: float, cause: Any) -> redis.ConnectionError:
    what = "primary" if primary else "node for reads"
    return redis.ConnectionError(
        f"no usable {what} of {core.service!r} within {budget:g}s through {core.url_redacted}: {cause}"
    )


class _RoutedMixin:
    """The routing and fencing of :class:`SentinelRoutedConnection` (also used with TLS)."""

    def __init__(
        self,
        *,
        sentinel_url: str,
        sentinel_options: Optional[Dict[str, Any]] = None,
        sentinel_primary: bool = True,
        **kwargs: Any,
    ) -> None:
        self.sentinel_url = sentinel_url
        self.sentinel_options = dict(sentinel_options or {})
        self.sentinel_primary = bool(sentinel_primary)
        self._core = core_for(sentinel_url, self.sentinel_options)
        self._guard = Guard(self._core, self.sentinel_primary)
        kwargs.pop("host", None)
        kwargs.pop("port", None)
        super().__init__(host="", port=0, **kwargs)  # type: ignore[call-arg]

    # ---- connecting: the core says where, ROLE confirms, a failure is reported ----

    def _connect_budget(self) -> float:
        timeout = getattr(self, "socket_connect_timeout", None)
        if timeout:
            return float(timeout)
        return float(self._core.settings["command_timeout"])

    def _routed_connect(self, attempt: Any) -> None:
        core = self._core
        guard = self._guard
        core.check_fork()
        budget = self._connect_budget()
        deadline = time.monotonic() + budget
        last: Any = "no attempt finished"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _route_error(core, self.sentinel_primary, budget, last)
            try:
                host, port = core.native.route_blocking(self.sentinel_primary, remaining)
            except _CoreError as e:
                raise _route_error(core, self.sentinel_primary, budget, e) from e
            self.host, self.port = host, port
            guard.handshaking = True
            try:
                attempt()
                role = self._role() if self.sentinel_primary else None
            except (AuthenticationError, AuthorizationError):
                self.disconnect()
                raise
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                self.disconnect()
                core.report_unusable(host, port)
                last = e
                time.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                continue
            finally:
                guard.handshaking = False
            if role is not None and role != "master":
                self.disconnect()
                core.report_unusable(host, port)
                last = f"{node_text(host, port)} answered ROLE {role}"
                time.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                continue
            if not guard.routable(host, port):
                # A failover began while we connected: nothing was sent, ask again.
                self.disconnect()
                last = f"a failover began demoting {node_text(host, port)}"
                continue
            return

    def _role(self) -> str:
        self.send_command("ROLE", check_health=False)
        return role_of(self.read_response())

    if _HAS_CONNECT_CHECK_HEALTH:

        def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
            """Connects where the core routes (see the module doc); no-op when connected."""
            if self._sock:
                return
            parent = super().connect_check_health  # type: ignore[misc]
            self._routed_connect(lambda: parent(check_health=check_health, retry_socket_connect=False))

    else:

        def connect(self) -> None:
            """Connects where the core routes (see the module doc); no-op when connected."""
            if self._sock:
                return
            self._routed_connect(super().connect)  # type: ignore[misc]

    # ---- sending: never to a node that is no longer routable ----
    # The checks before the send and after the reply cost one comparison while the core's
    # routing counter stays where it was when the core last allowed this connection (Guard).

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        guard = self._guard
        try:
            name = NAMES[args[0]]
        except (KeyError, TypeError, IndexError):
            name = remember_name(args)
        # The handshake is not fenced, but its re-subscriptions (PubSub.on_connect) are noted.
        if guard.verified != guard.epoch[0] and not guard.handshaking:
            self._fence_before_send((name,))
        if name in NOTED_COMMANDS:
            guard.note((name,))
        # redis-py's own send_command, so the common path adds no call of its own.
        self.send_packed_command(self._command_packer.pack(*args), check_health=kwargs.get("check_health", True))

    def pack_commands(self, commands: Any) -> Any:
        """Packs a pipeline; the fence runs here, just before redis-py sends what this returns."""
        commands = [tuple(c) for c in commands]
        guard = self._guard
        if not guard.handshaking:
            names = tuple(command_name(c) for c in commands)
            if guard.verified != guard.epoch[0]:
                self._fence_before_send(names)
            guard.note(names)
        return super().pack_commands(commands)  # type: ignore[misc]

    def _fence_before_send(self, names: Tuple[str, ...]) -> None:
        if not self._sock:
            return  # the send connects through the core
        refused = self._guard.before_send(self.host, self.port, names)
        if refused is None:
            return
        self.disconnect()
        if refused is not MOVE:
            raise refused

    # ---- reading: a reply from a primary being demoted is not trusted ----

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = super().read_response(*args, **kwargs)  # type: ignore[misc]
        except ReadOnlyError as e:
            if not self.sentinel_primary:
                raise
            host, port = self.host, self.port
            self.disconnect()
            self._core.report_unusable(host, port)
            raise redis.ConnectionError(f"{node_text(host, port)} is now a replica: the command was refused") from e
        except ResponseError as e:
            if self.sentinel_primary and str(e).startswith(_DEMOTED_UNBLOCKED):
                host, port = self.host, self.port
                self.disconnect()
                self._core.report_unusable(host, port)
                raise redis.ConnectionError(f"{node_text(host, port)} was demoted while the command blocked") from e
            raise
        guard = self._guard
        if guard.verified != guard.epoch[0] and self.sentinel_primary and not guard.handshaking:
            distrusted = guard.after_reply(self.host, self.port)
            if distrusted is not None:
                self.disconnect()
                raise distrusted
        return response

    def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._guard.forget()
        super().disconnect(*args, **kwargs)  # type: ignore[misc]

    def routable(self) -> bool:
        """Whether this connection is unconnected or connected to a node it may still use."""
        if not self._sock:
            return True
        guard = self._guard
        return guard.verified == guard.epoch[0] or guard.routable(self.host, self.port)

    def repr_pieces(self) -> List[Tuple[str, Any]]:
        role = "primary" if self.sentinel_primary else "read"
        return [("service", self._core.service), ("route", role), ("host", self.host), ("port", self.port)]


class SentinelRoutedConnection(_RoutedMixin, redis.connection.Connection):
    """A ``redis.connection.Connection`` whose address comes from the core.

    Connection kwargs: ``sentinel_url`` (the ``redis+sentinel://`` URL), ``sentinel_options``
    (the core's options, as for :class:`sentinel_recovery.BlockingClient`), ``sentinel_primary``
    (True: the primary; False: a node for reads under the URL's ``read_from``), and redis-py's
    own (``socket_timeout``, ``decode_responses``, ...; no ``host``/``port``). Promises: see the
    module doc (routing, ROLE check, fencing before the send and after the reply).
    """


class SentinelRoutedSSLConnection(_RoutedMixin, redis.connection.SSLConnection):
    """:class:`SentinelRoutedConnection` over TLS (the URL's ``data_tls``; ``ssl_*`` kwargs are
    redis-py's)."""


class ConnectionPool(redis.ConnectionPool):
    """A ``redis.ConnectionPool`` of :class:`SentinelRoutedConnection`: build it with
    :meth:`from_url` (Django's ``pool_class``) or through :meth:`Sentinel.master_for`.

    Promises, beyond the connections' own: at the core's ``failover_started`` and
    ``primary_changed`` events the idle connections to a node no longer routable are closed at
    once (under the pool's lock), and at ``primary_changed`` the subscribers there have their
    stream ended (see the module doc); a connection checked out is checked before its first send, and one in use is
    closed when it is released. After ``fork()`` the child's pool starts empty (redis-py's pid
    check) and its connections route through the core in the child.
    """

    def __init__(self, connection_class: Optional[Type[Any]] = None, max_connections: Optional[int] = None, **connection_kwargs: Any) -> None:
        url = connection_kwargs.get("sentinel_url")
        if url is None:
            raise TypeError("ConnectionPool needs sentinel_url= (or use ConnectionPool.from_url(url))")
        core = core_for(url, connection_kwargs.get("sentinel_options"))
        connection_kwargs = merge_url_settings(core, connection_kwargs)
        if connection_class is None:
            tls = bool(core.settings.get("data_tls"))
            connection_class = SentinelRoutedSSLConnection if tls else SentinelRoutedConnection
        if not (isinstance(connection_class, type) and issubclass(connection_class, _RoutedMixin)):
            raise TypeError(
                f"connection_class={getattr(connection_class, '__name__', connection_class)}: must be a "
                "subclass of SentinelRoutedConnection (its address comes from Sentinel)"
            )
        no_retry_defaults(connection_kwargs, Retry, NoBackoff)
        self._core = core
        super().__init__(connection_class=connection_class, max_connections=max_connections, **connection_kwargs)
        core.listen(self)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "ConnectionPool":
        """A pool for ``url`` (``redis+sentinel://[user[:password]@]host:port,.../service?key=...``).

        The URL goes to the core unparsed (its keys are the core's options); ``kwargs`` are
        redis-py's (``socket_timeout``, ``decode_responses``, ``max_connections``, ...) plus
        ``sentinel_options`` (dict of core options) and ``is_master`` (default True; False routes
        reads under the URL's ``read_from``). ``host``/``port`` or a kwarg that contradicts the
        URL (``password``, ``username``, ``db``, ``client_name``, ``ssl``) raise ``ValueError``.
        """
        if not isinstance(url, str) or "+sentinel://" not in url.split("?", 1)[0][:24]:
            shown = url.split("://", 1)[0] if isinstance(url, str) else type(url).__name__
            raise ValueError(
                f"ConnectionPool.from_url needs a redis+sentinel:// (or rediss+, valkey+) URL, got {shown}://...; "
                "for a plain redis:// URL use redis.ConnectionPool"
            )
        kwargs = dict(kwargs)
        primary = kwargs.pop("is_master", True)
        return cls(sentinel_url=url, sentinel_primary=bool(primary), **kwargs)

    def on_topology_event(self, kind: str) -> None:
        """Closes idle connections to nodes no longer routable and, at ``primary_changed``, ends
        the streams of subscribers there (called from the core's events)."""
        if self.pid != os.getpid():
            return  # a forked copy: the child's pool resets itself on first use
        with self._lock:
            for connection in list(self._available_connections):
                if not connection.routable():
                    connection.disconnect()
            if kind != "primary_changed":
                return
            subscribers = [c for c in self._in_use_connections if c._guard.subscribed and not c.routable()]
        # A subscriber on a demoted (or unreachable) node would hear nothing published on the new
        # primary until Sentinel closes it (seconds), or ever (a partition): end its stream now.
        # Not at failover_started: its thread would then reconnect during the promotion, when
        # the application's own (UN)SUBSCRIBE on the same connection is most likely, and two
        # threads connecting one redis-py connection read each other's handshake.
        for connection in subscribers:
            end_stream(connection._sock)

    def release(self, connection: Any) -> None:
        # A checked-out connection needs no check of its own: its first send is fenced.
        guard = getattr(connection, "_guard", None)
        if guard is not None and guard.verified != guard.epoch[0] and not connection.routable():
            connection.disconnect()
        super().release(connection)

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} {self._core.url_redacted}>"


class Sentinel:
    """A stand-in for ``redis.sentinel.Sentinel`` backed by one core monitor.

    ``Sentinel(url, connection_kwargs=None, **options)``: ``url`` is the ``redis+sentinel://``
    URL, ``options`` the core's (``command_timeout_ms=...``, ``read_from=...``, ``address_map``,
    ...), ``connection_kwargs`` redis-py's defaults for :meth:`master_for` / :meth:`slave_for`
    (as redis-py's ``Sentinel(**connection_kwargs)``). No method does network I/O on the calling
    thread: the core's own threads talk to the sentinels.
    """

    def __init__(self, url: str, connection_kwargs: Optional[Dict[str, Any]] = None, **options: Any) -> None:
        self.url = url
        self.options = options
        self.connection_kwargs = dict(connection_kwargs or {})
        self._core = core_for(url, options)

    @property
    def service_name(self) -> str:
        """The service of the URL (the only one this Sentinel answers for)."""
        return self._core.service

    def _wait(self) -> float:
        timeout = self.connection_kwargs.get("socket_connect_timeout") or self.connection_kwargs.get("socket_timeout")
        return float(timeout) if timeout else float(self._core.settings["command_timeout"])

    def discover_master(self, service_name: str) -> Tuple[str, int]:
        """The verified primary's ``(host, port)``; waits (GIL released) for one within the
        connect timeout (``socket_connect_timeout`` / ``socket_timeout`` of ``connection_kwargs``,
        else the URL's ``command_timeout_ms``), then raises ``MasterNotFoundError``. Never
        returns a primary a failover is demoting (it waits for the promotion)."""
        self._core.check_service(service_name)
        wait = self._wait()
        try:
            return self._core.native.route_blocking(True, wait)
        except _CoreError as e:
            raise MasterNotFoundError(f"no primary of {service_name!r} within {wait:g}s: {e}") from e

    def discover_slaves(self, service_name: str) -> List[Tuple[str, int]]:
        """The healthy replicas the core knows (``(host, port)`` list; never waits)."""
        self._core.check_service(service_name)
        return [(r["host"], int(r["port"])) for r in self._core.native.topology()["replicas"]]

    discover_replicas = discover_slaves

    def _client(self, service_name: str, primary: bool, redis_class: Any, connection_pool_class: Any, kwargs: Dict[str, Any]) -> Any:
        self._core.check_service(service_name)
        merged = dict(self.connection_kwargs)
        merged.update(kwargs)
        merged.pop("is_master", None)
        merged.pop("check_connection", None)  # ROLE is checked on every new socket anyway
        pool = connection_pool_class(
            sentinel_url=self.url, sentinel_options=self.options, sentinel_primary=primary, **merged
        )
        if hasattr(redis_class, "from_pool"):
            return redis_class.from_pool(pool)
        return redis_class(connection_pool=pool)

    def master_for(
        self,
        service_name: str,
        redis_class: Any = redis.Redis,
        connection_pool_class: Any = ConnectionPool,
        **kwargs: Any,
    ) -> Any:
        """A ``redis_class`` client of the primary (redis-py's signature); ``kwargs`` are
        redis-py connection kwargs. Its pool is a :class:`ConnectionPool` (or the subclass given)."""
        return self._client(service_name, True, redis_class, connection_pool_class, kwargs)

    def slave_for(
        self,
        service_name: str,
        redis_class: Any = redis.Redis,
        connection_pool_class: Any = ConnectionPool,
        **kwargs: Any,
    ) -> Any:
        """A ``redis_class`` client for reads, routed under the URL's ``read_from`` (set
        ``read_from=replica`` or ``prefer-replica`` for replicas; ``primary`` reads the primary)."""
        return self._client(service_name, False, redis_class, connection_pool_class, kwargs)

    replica_for = slave_for

    def __repr__(self) -> str:
        return f"<sentinel_recovery.redis_py.Sentinel {self._core.url_redacted}>"


# Adapter keys travel in connection kwargs; keep the name importable for sibling modules.
_ADAPTER_KEYS = ADAPTER_KEYS
