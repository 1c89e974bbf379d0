"""The fencing RESP proxy in this process: :class:`Proxy`, for clients that keep their own code.

Any Redis client (plain redis-py, a library built on it, a subprocess speaking RESP) points at the
proxy's local address as if at one standalone Redis and gets the core's failover behaviour: one
session per client connection with its own upstream connection to the verified primary, nothing
written to a primary being demoted, sessions moved with their state replayed, and nothing re-sent
that may have reached a server. The proxy, its sessions and its client run on the core's threads,
never on this process's threads or event loop.
"""

from __future__ import annotations

import os
from typing import Any, Optional, TypedDict

from . import _native
from ._calls import _LOGGER, OptionValue, _option_text

__all__ = ["Proxy", "ProxyStats"]


class ProxyStats(TypedDict):
    """What a proxy has done since it started (:meth:`Proxy.stats`). Every field only grows,
    except ``sessions_open``."""

    #: Client connections open now.
    sessions_open: int
    #: Client connections accepted since the start.
    sessions_accepted: int
    #: Client connections refused with ``max number of clients reached``.
    sessions_refused: int
    #: Requests written to a data node.
    commands_forwarded: int
    #: Requests that had to wait for a primary (a promotion under way, no primary yet).
    commands_held: int
    #: Time those requests waited, summed, in seconds.
    held_seconds: float
    #: Held requests answered ``FENCED`` because no primary came within the hold bound.
    held_expired: int
    #: Replies read from a primary being demoted that were turned into ``UNCERTAIN`` errors.
    fenced_replies: int
    #: Writes answered ``NOTREPLICATED`` (``wait_replicas``).
    not_replicated: int
    #: Sessions moved to a new primary with their state replayed.
    moves: int
    #: Sessions closed at a move because their state could not follow (MONITOR, CLIENT
    #: TRACKING, a reply still pending past the hold bound).
    sessions_closed_at_move: int
    #: ``primary_changed`` events seen.
    primary_changes: int
    #: Upstream connections that failed to open or broke.
    upstream_errors: int
    #: Client connections closed for malformed or oversized requests.
    malformed_requests: int


class Proxy:
    """A fencing RESP proxy in front of one Sentinel-managed service, running in this process.

    ``Proxy(url, **options)`` (or ``Proxy.start(url, **options)``) returns once the proxy accepts
    connections; it never waits for discovery (a request that arrives before the primary is
    known waits for it within the hold bound). Use it as a context manager, sync or async::

        with Proxy("redis+sentinel://127.0.0.1:26379/mymaster") as proxy:
            r = redis.Redis.from_url(proxy.url)        # plain redis-py, no Sentinel code
            r.set("key", "value")

        async with Proxy(url, listen="unix:/run/app/redis.sock") as proxy:
            ...                                        # leaving it never blocks the loop

    Options are keyword arguments. The proxy's own:

    * ``listen``: ``"IP:PORT"`` (default ``"127.0.0.1:0"``, a free loopback port) or
      ``"unix:PATH"``. An address that is not loopback needs ``allow_remote=True``: the proxy
      passes on whatever reaches it, so exposing it exposes the primary beyond this host without
      the server's own network protections.
    * ``hold_ms``: how long a request may wait for a verified primary (a promotion under way,
      none known yet) before it is answered ``FENCED`` without being sent (default: the URL's
      ``command_timeout_ms``).
    * ``max_clients`` (default 10000), ``idle_timeout_ms`` (default 0: never),
      ``max_request_bytes`` (default 512 MiB), ``route`` (``"primary"``, default, or ``"read"``:
      sessions go where ``read_from`` sends reads), ``lend_credentials`` (authenticate clients
      that did not with the URL's data-node credentials; off by default, loopback or Unix socket
      only), ``allow_remote``, ``unix_mode`` (octal text, default ``"600"``).

    Any other key is the client's, as in the URL's query (``command_timeout_ms``,
    ``read_from``, ``wait_replicas``, an ``address_map`` string, ...). The core checks every
    option: a bad one raises :class:`ConfigError` whose message names the key.

    Error replies of the proxy itself begin with a stable code word (redis-py raises them as
    ``ResponseError``): ``UNCERTAIN`` (the command reached a primary being demoted, or its
    connection broke before the reply: it may or may not have been applied; never re-sent),
    ``FENCED`` (no verified primary within the hold bound: not sent), ``NOTREPLICATED``
    (``wait_replicas`` not met) and ``EXECABORT`` (a MULTI was open when the primary changed).
    """

    __slots__ = ("_native", "_url")

    def __init__(self, url: str, **options: OptionValue) -> None:
        """Starts a proxy for ``url`` (``redis+sentinel://...``); see the class documentation."""
        if not isinstance(url, str):
            raise TypeError("url must be a str")
        pairs = []
        for key, value in options.items():
            if callable(value):
                raise TypeError(
                    f"option {key}: a Proxy takes the string form only (a function runs in this process's"
                    " client, not the proxy's)"
                )
            pairs.append((key, _option_text(key, value)))
        _native._set_log_level(_LOGGER.getEffectiveLevel())
        self._native = _native.NativeProxy.start(url, pairs)
        path = self._native.path
        if path is None:
            host = self._native.host
            assert host is not None
            shown = f"[{host}]" if ":" in host else host
            self._url = f"redis://{shown}:{self._native.port}"
        else:
            self._url = f"unix://{os.path.abspath(path)}"

    @classmethod
    def start(cls, url: str, **options: OptionValue) -> "Proxy":
        """The same as ``Proxy(url, **options)``."""
        return cls(url, **options)

    @property
    def address(self) -> str:
        """Where the proxy listens: ``"127.0.0.1:PORT"`` (``"[::1]:PORT"``) or ``"unix:PATH"``."""
        return self._native.address

    @property
    def host(self) -> Optional[str]:
        """The listening IP address (no brackets for IPv6); ``None`` on a Unix socket."""
        return self._native.host

    @property
    def port(self) -> Optional[int]:
        """The listening port (the one picked for port 0); ``None`` on a Unix socket."""
        return self._native.port

    @property
    def path(self) -> Optional[str]:
        """The Unix socket's path; ``None`` on TCP."""
        return self._native.path

    @property
    def url(self) -> str:
        """A plain Redis URL of the proxy for any client: ``redis://127.0.0.1:PORT`` or
        ``unix:///PATH`` (e.g. ``redis.Redis.from_url(proxy.url)``). It carries no credentials:
        a client authenticates with its own (``AUTH`` / ``HELLO AUTH``, checked by the server)."""
        return self._url

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` or :meth:`aclose` was called."""
        return self._native.closed

    def stats(self) -> ProxyStats:
        """The proxy's counters now; never waits. Raises :class:`ClosedError` once closed."""
        return self._native.stats()  # type: ignore[no-any-return]

    def close(self, grace: Optional[float] = None) -> None:
        """Stops accepting, lets replies in flight reach their clients for up to ``grace``
        seconds (default 5), then closes every session and the proxy's client; returns when that
        is done. Waits with the GIL released (Ctrl-C raises ``KeyboardInterrupt``; the close goes
        on). Idempotent. From a coroutine use :meth:`aclose`, which does not block the loop."""
        self._native.close_blocking(grace)

    async def aclose(self, grace: Optional[float] = None) -> None:
        """:meth:`close` for asyncio: the loop keeps running while the proxy closes on the core's
        threads. Idempotent."""
        # Cancelling the awaiting task does not stop the close: it goes on on the core's threads.
        await self._native.close_async(grace)

    def __enter__(self) -> "Proxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> "Proxy":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        state = " closed" if self.closed else ""
        return f"<sentinel_recovery.Proxy {self.address}{state}>"
