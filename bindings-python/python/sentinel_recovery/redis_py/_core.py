"""One core client per (url, options), shared by every pool and connection of the adapter.

The adapter never sends a command through the core: it asks the core where a connection goes
(``route_*``), whether it may still go there (``is_routable`` / ``is_fenced``) and fans the
core's events out to the pools so they can close connections to a demoted primary.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import weakref
from typing import Any, Callable, Dict, Optional, Tuple

from redis.exceptions import ConnectionError as RedisConnectionError

from .. import _native, _open

_LOGGER = logging.getLogger("sentinel_recovery.redis_py")

#: Events after which a pooled connection may point at a node that must no longer be written.
TOPOLOGY_EVENTS = frozenset({"primary_changed", "failover_started"})


class Core:
    """A core client and the pools listening to its events (internal)."""

    def __init__(self, url: str, options: Dict[str, Any]) -> None:
        self.native: "_native.NativeClient" = _open(url, False, dict(options))
        self.url_redacted: str = self.native.url
        self.service: str = self.native.topology()["service"]
        self.settings: Dict[str, Any] = self.native.connection_settings()
        self._listeners: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._lock = threading.Lock()
        self._pid = os.getpid()
        #: The core's routing counter (``epoch[0]``): while it reads what a connection saw when
        #: the core last allowed it, the core's answer has not changed (see :class:`Guard`).
        self.epoch: memoryview = self.native.routing_epoch_view().cast("Q")
        self.native.set_event_callback(self._on_event)

    def check_fork(self) -> None:
        """After a fork, installs the event callback again in the child (the parent's callback
        thread does not exist there); the core itself follows the fork.

        The callback is installed on a thread of its own, never the caller's: installing it
        waits until the binding's dispatcher has handed over what was already pushed, and in a
        fresh child that is the child monitor's first ``primary_changed``, whose delivery
        (``_on_event``) takes this core's lock and each pool's lock. The caller may hold one of
        them: redis-py builds connections (and so calls this) under the pool's lock. Waiting
        there deadlocked RQ's forked work-horses. Until it is installed the pools miss events,
        which only delays closing idle connections: every connection still checks ``routable``
        at checkout, before each send and after each reply."""
        pid = os.getpid()
        if pid == self._pid:
            return
        with self._lock:
            if pid == self._pid:
                return  # another thread of this child got here first
            self._pid = pid
        # The child's core follows its own monitor, with a counter of its own.
        self.epoch = self.native.routing_epoch_view().cast("Q")
        threading.Thread(target=self._listen_in_child, name="sr-redis-py-fork", daemon=True).start()

    def _listen_in_child(self) -> None:
        try:
            self.native.set_event_callback(self._on_event)
        except Exception:  # a closed client: connections report their own errors
            _LOGGER.debug("event callback not installed in the forked child", exc_info=True)

    def _after_fork_in_child(self) -> None:
        # A thread of the parent may have held the lock at fork(): it does not exist in the
        # child, so the child's copy would stay held for ever. Only the forking thread runs here.
        self._lock = threading.Lock()

    def listen(self, pool: Any) -> None:
        """``pool.on_topology_event(kind)`` is called at ``primary_changed`` / ``failover_started``."""
        with self._lock:
            self._listeners.add(pool)

    def _on_event(self, event: Dict[str, Any]) -> None:
        # Runs on the binding's callback thread (never a core thread), one event at a time.
        kind = event.get("kind")
        if kind not in TOPOLOGY_EVENTS:
            return
        with self._lock:
            pools = list(self._listeners)
        for pool in pools:
            try:
                pool.on_topology_event(kind)
            except Exception:  # one broken pool must not starve the others
                _LOGGER.exception("closing connections to a demoted primary failed")

    def is_routable(self, host: str, port: int, primary: bool) -> bool:
        return self.native.is_routable(host, int(port), primary)

    def is_fenced(self, host: str, port: int) -> bool:
        return self.native.is_fenced(host, int(port))

    def report_unusable(self, host: str, port: int) -> None:
        try:
            self.native.report_unusable(host, int(port))
        except Exception:  # a closed client: the caller's own error says enough
            pass

    def check_service(self, service_name: str) -> None:
        if service_name != self.service:
            raise ValueError(
                f"service {service_name!r}: this adapter follows {self.service!r}, the service of "
                f"{self.url_redacted}; open another Sentinel (URL) for another service"
            )


_CORES: Dict[Tuple[str, Tuple[Tuple[str, Any], ...]], Core] = {}
_CORES_LOCK = threading.Lock()


def _after_fork_in_child() -> None:
    """Fresh locks in a forked child (``os.register_at_fork``): a parent thread holding one at
    the fork (opening a core, delivering an event) would otherwise leave it held for ever."""
    global _CORES_LOCK
    _CORES_LOCK = threading.Lock()
    for core in list(_CORES.values()):
        core._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _key(url: str, options: Dict[str, Any]) -> Tuple[str, Tuple[Tuple[str, Any], ...]]:
    # Functions (address_map) count by identity; everything else by value.
    items = []
    for name in sorted(options):
        value = options[name]
        items.append((name, ("fn", id(value)) if callable(value) else value))
    return url, tuple(items)


def core_for(url: str, options: Optional[Dict[str, Any]] = None) -> Core:
    """The one :class:`Core` of ``(url, options)``, opened on first use (raises the core's
    ``ConfigError`` for a bad URL or option)."""
    if not isinstance(url, str):
        raise TypeError(f"sentinel_url must be a str (a redis+sentinel:// URL), got {type(url).__name__}")
    options = dict(options or {})
    key = _key(url, options)
    with _CORES_LOCK:
        core = _CORES.get(key)
        if core is None or core.native.closed:
            core = Core(url, options)
            _CORES[key] = core
    core.check_fork()
    return core


def role_of(reply: Any) -> str:
    """The role name in a ROLE reply (bytes or str, RESP2 or RESP3)."""
    if isinstance(reply, (list, tuple)) and reply:
        first = reply[0]
        if isinstance(first, bytes):
            return first.decode("ascii", "replace")
        return str(first)
    return repr(reply)


class TransactionState:
    """Whether the server keeps WATCH or MULTI state for a connection: such a connection must
    not be silently moved to another node (its EXEC would run without the WATCH)."""

    __slots__ = ("watching", "multi")

    def __init__(self) -> None:
        self.watching = False
        self.multi = False

    @property
    def active(self) -> bool:
        return self.watching or self.multi

    def clear(self) -> None:
        self.watching = False
        self.multi = False

    def note(self, names: Tuple[str, ...]) -> None:
        """Follows the commands about to be sent, in order."""
        for name in names:
            if name == "WATCH":
                self.watching = True
            elif name == "MULTI":
                self.multi = True
            elif name in ("EXEC", "DISCARD", "RESET"):
                self.clear()
            elif name == "UNWATCH":
                self.watching = False


#: Commands that end server-side transaction state: sending them to a new node is harmless.
ENDING_COMMANDS = frozenset({"UNWATCH", "DISCARD", "RESET"})
#: Commands that start or end server-side transaction state (what :class:`TransactionState` follows).
TRANSACTION_COMMANDS = frozenset({"WATCH", "MULTI", "EXEC"}) | ENDING_COMMANDS

#: Commands that make or end a subscriber connection. They write nothing a failover could
#: discard, so they are sent where the connection's subscriptions are, never moved: moving means
#: reconnecting, and redis-py's ``PubSub.run_in_thread`` (RQ's worker) reads the connection on
#: another thread, which would then reconnect it too and read the other's handshake replies.
SUBSCRIPTION_COMMANDS = frozenset({"SUBSCRIBE", "UNSUBSCRIBE", "PSUBSCRIBE", "PUNSUBSCRIBE", "SSUBSCRIBE", "SUNSUBSCRIBE"})
#: Every command name whose sending changes what a :class:`Guard` follows.
NOTED_COMMANDS = TRANSACTION_COMMANDS | SUBSCRIPTION_COMMANDS

#: A verdict no counter value equals: the connection has not been allowed anywhere yet.
UNVERIFIED = -1


def command_name(args: Tuple[Any, ...]) -> str:
    if not args:
        return ""
    first = args[0]
    if isinstance(first, (bytes, bytearray, memoryview)):
        first = bytes(first).decode("ascii", "replace")
    # redis-py passes "CLIENT KILL" style names as one argument.
    return str(first).split(" ", 1)[0].upper()


#: First arguments seen, by value, with their command names: the shells look a name up here
#: (one dict lookup) instead of normalizing it for every command.
NAMES: Dict[Any, str] = {}
_NAMES_KEPT = 4096


def remember_name(args: Tuple[Any, ...]) -> str:
    """``command_name(args)``, kept in :data:`NAMES` (up to a bound, so first arguments that are
    data cannot grow it without end)."""
    name = command_name(args)
    if args and len(NAMES) < _NAMES_KEPT:
        try:
            NAMES[args[0]] = name
        except TypeError:  # an unhashable first argument (bytearray)
            pass
    return name


class Guard:
    """Where one adapter connection stands with the core; the sync and asyncio connections share
    it and do the I/O it decides (close, raise).

    The core's verdicts (``is_routable`` / ``is_fenced``) only change when its routing counter
    moves, so a connection asks the core once per counter value: the shells compare
    ``verified`` with ``epoch[0]`` inline before each send and after each reply, and call the
    methods here only when they differ. The counter is read *before* asking, so a change during
    the question makes the next comparison ask again.
    """

    __slots__ = ("core", "primary", "epoch", "verified", "transaction", "subscribed", "handshaking")

    def __init__(self, core: Core, primary: bool) -> None:
        self.core = core
        self.primary = primary
        self.epoch = core.epoch
        self.verified = UNVERIFIED
        self.transaction = TransactionState()
        #: True once a subscription command was sent on this socket: its reads are messages.
        self.subscribed = False
        #: True while the connection runs its own handshake (AUTH, HELLO, ROLE): not fenced.
        self.handshaking = False

    def routable(self, host: str, port: int) -> bool:
        """Whether the connected node may still be used; remembers a yes for this counter value."""
        seen = self.epoch[0]
        if self.core.is_routable(host, port, self.primary):
            self.verified = seen
            return True
        return False

    def before_send(self, host: str, port: int, names: Tuple[str, ...]) -> Optional[Exception]:
        """Called when the counter moved, with the commands about to be sent on a connection to
        ``host:port``. Returns None to send there; otherwise the shell closes the connection and
        then raises the returned exception, or, when it is :data:`MOVE`, sends through a new
        connection the core routes."""
        if self.routable(host, port):
            return None
        if names and all(n in SUBSCRIPTION_COMMANDS or (n == "PING" and self.subscribed) for n in names):
            return None  # see SUBSCRIPTION_COMMANDS; a subscriber's PING is its health check
        if self.transaction.active and not (names and all(n in ENDING_COMMANDS for n in names)):
            return RedisConnectionError(
                f"{node_text(host, port)} is no longer the primary (a failover began): the WATCH/MULTI "
                "of this connection cannot move to another server; nothing was sent"
            )
        return MOVE

    def after_reply(self, host: str, port: int) -> Optional[Exception]:
        """Called when the counter moved, after a reply was read from ``host:port`` (primary
        connections only). Returns None to trust it; otherwise the shell closes the connection and
        raises the returned exception (the reply may be a write the failover discards).
        A subscriber's reads are trusted: messages and subscription replies acknowledge no write."""
        if self.subscribed:
            return None
        seen = self.epoch[0]
        if self.core.is_fenced(host, port):
            return RedisConnectionError(
                f"{node_text(host, port)} answered after a failover began demoting it: the reply is "
                "not trusted, a write may be discarded by the failover (not retried)"
            )
        if self.core.is_routable(host, port, self.primary):
            self.verified = seen
        return None

    def note(self, names: Tuple[str, ...]) -> None:
        """Follows the commands about to be sent (transaction state, subscriptions)."""
        self.transaction.note(names)
        if not self.subscribed and any(n in SUBSCRIPTION_COMMANDS for n in names):
            self.subscribed = True

    def forget(self) -> None:
        """The socket closed: the server forgot WATCH, MULTI and subscriptions, and nothing is
        verified."""
        self.verified = UNVERIFIED
        self.transaction.clear()
        self.subscribed = False


#: :meth:`Guard.before_send`'s answer for "close, then send through a connection the core routes".
MOVE = ConnectionAbortedError("moved to the node the core routes to")


def end_stream(sock: Any) -> None:
    """Shuts a subscriber's socket down both ways without closing it (see the pools'
    ``primary_changed`` handling): its reader sees the end of the stream and reconnects through
    the core; the descriptor stays valid, so a thread blocked on it can't read a reused one."""
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by its own reader


def node_text(host: Any, port: Any) -> str:
    return f"{host}:{port}"


Callback = Callable[[], None]
