"""``redis.asyncio`` on sentinel-recovery: the asyncio twin of :mod:`sentinel_recovery.redis_py`.

Three-line setup::

    from sentinel_recovery.redis_py.asyncio import Sentinel
    r = Sentinel("redis+sentinel://127.0.0.1:26379/mymaster").master_for("mymaster")
    await r.set("key", "value")

The promises are those of the sync module (routing, ROLE check, fencing before the send and
after the reply, no retries by default); waiting for a primary never blocks the event loop (the
core routes on its own threads and completes an asyncio future). Use a pool from one event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Dict, List, Optional, Tuple, Type

import redis.asyncio
import redis.asyncio.connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import AuthenticationError, AuthorizationError, ReadOnlyError, ResponseError
from redis.sentinel import MasterNotFoundError, SlaveNotFoundError

from .. import Error as _CoreError
from . import _route_error, _RETRY_PAUSE, _DEMOTED_UNBLOCKED
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
from ._settings import merge_url_settings, no_retry_defaults

__all__ = [
    "Sentinel",
    "ConnectionPool",
    "SentinelRoutedConnection",
    "SentinelRoutedSSLConnection",
    "MasterNotFoundError",
    "SlaveNotFoundError",
]

_HAS_CONNECT_CHECK_HEALTH = hasattr(redis.asyncio.connection.AbstractConnection, "connect_check_health")


async def _route(core: Core, primary: bool, timeout: float) -> Tuple[str, int]:
    return await core.native.route_async(primary, timeout)


class _AsyncRoutedMixin:
    """Routing and fencing of :class:`SentinelRoutedConnection` (also used with TLS)."""

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
        self._pipeline_names: Tuple[str, ...] = ()
        kwargs.pop("host", None)
        kwargs.pop("port", None)
        super().__init__(host="", port=0, **kwargs)  # type: ignore[call-arg]

    def _connect_budget(self) -> float:
        timeout = getattr(self, "socket_connect_timeout", None)
        if timeout:
            return float(timeout)
        return float(self._core.settings["command_timeout"])

    async def _routed_connect(self, attempt: Any) -> None:
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
                host, port = await _route(core, self.sentinel_primary, remaining)
            except _CoreError as e:
                raise _route_error(core, self.sentinel_primary, budget, e) from e
            self.host, self.port = host, port
            guard.handshaking = True
            try:
                await attempt()
                role = await self._role() if self.sentinel_primary else None
            except (AuthenticationError, AuthorizationError):
                await self.disconnect()
                raise
            except (redis.ConnectionError, redis.TimeoutError, OSError, asyncio.TimeoutError) as e:
                await self.disconnect()
                core.report_unusable(host, port)
                last = e
                await asyncio.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                continue
            finally:
                guard.handshaking = False
            if role is not None and role != "master":
                await self.disconnect()
                core.report_unusable(host, port)
                last = f"{node_text(host, port)} answered ROLE {role}"
                await asyncio.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
                continue
            if not guard.routable(host, port):
                await self.disconnect()
                last = f"a failover began demoting {node_text(host, port)}"
                continue
            return

    async def _role(self) -> str:
        await self.send_command("ROLE", check_health=False)
        return role_of(await self.read_response())

    if _HAS_CONNECT_CHECK_HEALTH:

        async def connect_check_health(self, check_health: bool = True, retry_socket_connect: bool = True) -> None:
            """Connects where the core routes; no-op when connected."""
            if self.is_connected:
                return
            parent = super().connect_check_health  # type: ignore[misc]
            await self._routed_connect(lambda: parent(check_health=check_health, retry_socket_connect=False))

    else:

        async def connect(self) -> None:
            """Connects where the core routes; no-op when connected."""
            if self.is_connected:
                return
            await self._routed_connect(super().connect)  # type: ignore[misc]

    # The checks before the send and after the reply cost one comparison while the core's
    # routing counter stays where it was when the core last allowed this connection (Guard).

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        guard = self._guard
        try:
            name = NAMES[args[0]]
        except (KeyError, TypeError, IndexError):
            name = remember_name(args)
        # The handshake is not fenced, but its re-subscriptions (PubSub.on_connect) are noted.
        if guard.verified != guard.epoch[0] and not guard.handshaking:
            await self._fence_before_send((name,))
        if name in NOTED_COMMANDS:
            guard.note((name,))
        # redis-py's own send_command, so the common path adds no call of its own.
        await self.send_packed_command(self.pack_command(*args), check_health=kwargs.get("check_health", True))

    def pack_commands(self, commands: Any) -> Any:
        """Packs a pipeline (synchronously); the fence runs in :meth:`send_packed_command`."""
        commands = [tuple(c) for c in commands]
        self._pipeline_names = tuple(command_name(c) for c in commands)
        return super().pack_commands(commands)  # type: ignore[misc]

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        names, self._pipeline_names = self._pipeline_names, ()
        guard = self._guard
        if names and not guard.handshaking:
            if guard.verified != guard.epoch[0]:
                await self._fence_before_send(names)
            guard.note(names)
        await super().send_packed_command(command, check_health)  # type: ignore[misc]

    async def _fence_before_send(self, names: Tuple[str, ...]) -> None:
        if not self.is_connected:
            return  # the send connects through the core
        refused = self._guard.before_send(self.host, self.port, names)
        if refused is None:
            return
        await self.disconnect()
        if refused is not MOVE:
            raise refused

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        try:
            response = await super().read_response(*args, **kwargs)  # type: ignore[misc]
        except ReadOnlyError as e:
            if not self.sentinel_primary:
                raise
            host, port = self.host, self.port
            await self.disconnect()
            self._core.report_unusable(host, port)
            raise redis.ConnectionError(f"{node_text(host, port)} is now a replica: the command was refused") from e
        except ResponseError as e:
            if self.sentinel_primary and str(e).startswith(_DEMOTED_UNBLOCKED):
                host, port = self.host, self.port
                await self.disconnect()
                self._core.report_unusable(host, port)
                raise redis.ConnectionError(f"{node_text(host, port)} was demoted while the command blocked") from e
            raise
        guard = self._guard
        if guard.verified != guard.epoch[0] and self.sentinel_primary and not guard.handshaking:
            distrusted = guard.after_reply(self.host, self.port)
            if distrusted is not None:
                await self.disconnect()
                raise distrusted
        return response

    async def disconnect(self, *args: Any, **kwargs: Any) -> None:
        self._guard.forget()
        await super().disconnect(*args, **kwargs)  # type: ignore[misc]

    def routable(self) -> bool:
        """Whether this connection is unconnected or connected to a node it may still use."""
        if not self.is_connected:
            return True
        guard = self._guard
        return guard.verified == guard.epoch[0] or guard.routable(self.host, self.port)

    def repr_pieces(self) -> List[Tuple[str, Any]]:
        role = "primary" if self.sentinel_primary else "read"
        return [("service", self._core.service), ("route", role), ("host", self.host), ("port", self.port)]


class SentinelRoutedConnection(_AsyncRoutedMixin, redis.asyncio.connection.Connection):
    """A ``redis.asyncio`` connection whose address comes from the core (kwargs and promises as
    :class:`sentinel_recovery.redis_py.SentinelRoutedConnection`)."""


class SentinelRoutedSSLConnection(_AsyncRoutedMixin, redis.asyncio.connection.SSLConnection):
    """:class:`SentinelRoutedConnection` over TLS."""


class ConnectionPool(redis.asyncio.ConnectionPool):
    """A ``redis.asyncio.ConnectionPool`` of :class:`SentinelRoutedConnection`
    (:meth:`from_url`, :meth:`Sentinel.master_for`). At ``failover_started`` / ``primary_changed``
    the idle connections to a node no longer routable are closed on the pool's event loop (under
    the pool's lock), and at ``primary_changed`` the subscribers there have their stream ended; a checked-out connection is checked before its first send; an in-use one is
    closed at release.
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
        if not (isinstance(connection_class, type) and issubclass(connection_class, _AsyncRoutedMixin)):
            raise TypeError(
                f"connection_class={getattr(connection_class, '__name__', connection_class)}: must be a "
                "subclass of sentinel_recovery.redis_py.asyncio.SentinelRoutedConnection"
            )
        no_retry_defaults(connection_kwargs, Retry, NoBackoff)
        self._core = core
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._pid = os.getpid()
        super().__init__(connection_class=connection_class, max_connections=max_connections, **connection_kwargs)
        core.listen(self)

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> "ConnectionPool":
        """As :meth:`sentinel_recovery.redis_py.ConnectionPool.from_url`."""
        if not isinstance(url, str) or "+sentinel://" not in url.split("?", 1)[0][:24]:
            shown = url.split("://", 1)[0] if isinstance(url, str) else type(url).__name__
            raise ValueError(
                f"ConnectionPool.from_url needs a redis+sentinel:// (or rediss+, valkey+) URL, got {shown}://...; "
                "for a plain redis:// URL use redis.asyncio.ConnectionPool"
            )
        kwargs = dict(kwargs)
        primary = kwargs.pop("is_master", True)
        return cls(sentinel_url=url, sentinel_primary=bool(primary), **kwargs)

    def on_topology_event(self, kind: str) -> None:
        """Schedules closing idle connections to nodes no longer routable on the pool's loop
        (called from the core's events, on another thread)."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._pid != os.getpid():
            return
        try:
            loop.call_soon_threadsafe(lambda: loop.create_task(self._close_unroutable_idle(kind)))
        except RuntimeError:
            pass  # the loop closed meanwhile

    async def _close_unroutable_idle(self, kind: str) -> None:
        async with self._lock:
            for connection in list(self._available_connections):
                if not connection.routable():
                    await connection.disconnect()
            if kind != "primary_changed":
                return
            # As the blocking pool's subscribers (see sentinel_recovery.redis_py): the reader
            # awaiting the stream sees its end; on the loop's own thread, so the transport is ours.
            for connection in list(self._in_use_connections):
                if connection._guard.subscribed and not connection.routable():
                    writer = getattr(connection, "_writer", None)
                    end_stream(writer.transport.get_extra_info("socket") if writer is not None else None)

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        # The loop the pool's events close idle connections on; the connection itself is
        # checked before its first send.
        self._loop = asyncio.get_running_loop()
        return await super().get_connection(*args, **kwargs)

    async def release(self, connection: Any) -> None:
        guard = getattr(connection, "_guard", None)
        if guard is not None and guard.verified != guard.epoch[0] and not connection.routable():
            await connection.disconnect()
        await super().release(connection)

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} {self._core.url_redacted}>"


class Sentinel:
    """The asyncio stand-in for ``redis.asyncio.sentinel.Sentinel`` (see
    :class:`sentinel_recovery.redis_py.Sentinel`); ``discover_master`` awaits the core's route
    without blocking the loop."""

    def __init__(self, url: str, connection_kwargs: Optional[Dict[str, Any]] = None, **options: Any) -> None:
        self.url = url
        self.options = options
        self.connection_kwargs = dict(connection_kwargs or {})
        self._core = core_for(url, options)

    @property
    def service_name(self) -> str:
        """The service of the URL."""
        return self._core.service

    def _wait(self) -> float:
        timeout = self.connection_kwargs.get("socket_connect_timeout") or self.connection_kwargs.get("socket_timeout")
        return float(timeout) if timeout else float(self._core.settings["command_timeout"])

    async def discover_master(self, service_name: str) -> Tuple[str, int]:
        """The verified primary's ``(host, port)``, waiting within the connect timeout for one
        (then ``MasterNotFoundError``); never one a failover is demoting."""
        self._core.check_service(service_name)
        wait = self._wait()
        try:
            return await _route(self._core, True, wait)
        except _CoreError as e:
            raise MasterNotFoundError(f"no primary of {service_name!r} within {wait:g}s: {e}") from e

    async def discover_slaves(self, service_name: str) -> List[Tuple[str, int]]:
        """The healthy replicas the core knows (never waits)."""
        self._core.check_service(service_name)
        return [(r["host"], int(r["port"])) for r in self._core.native.topology()["replicas"]]

    discover_replicas = discover_slaves

    def _client(self, service_name: str, primary: bool, redis_class: Any, connection_pool_class: Any, kwargs: Dict[str, Any]) -> Any:
        self._core.check_service(service_name)
        merged = dict(self.connection_kwargs)
        merged.update(kwargs)
        merged.pop("is_master", None)
        merged.pop("check_connection", None)
        pool = connection_pool_class(
            sentinel_url=self.url, sentinel_options=self.options, sentinel_primary=primary, **merged
        )
        if hasattr(redis_class, "from_pool"):
            return redis_class.from_pool(pool)
        return redis_class(connection_pool=pool)

    def master_for(
        self,
        service_name: str,
        redis_class: Any = redis.asyncio.Redis,
        connection_pool_class: Any = ConnectionPool,
        **kwargs: Any,
    ) -> Any:
        """A ``redis.asyncio.Redis`` of the primary (redis-py's signature)."""
        return self._client(service_name, True, redis_class, connection_pool_class, kwargs)

    def slave_for(
        self,
        service_name: str,
        redis_class: Any = redis.asyncio.Redis,
        connection_pool_class: Any = ConnectionPool,
        **kwargs: Any,
    ) -> Any:
        """A ``redis.asyncio.Redis`` for reads under the URL's ``read_from``."""
        return self._client(service_name, False, redis_class, connection_pool_class, kwargs)

    replica_for = slave_for

    def __repr__(self) -> str:
        return f"<sentinel_recovery.redis_py.asyncio.Sentinel {self._core.url_redacted}>"
