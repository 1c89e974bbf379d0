"""sentinel-recovery for Python: find and follow a Redis or Valkey primary through Sentinel.

Discovery, failover handling, DNS and reconnects run on the core's own threads (``sr-worker-N``),
never on the asyncio event loop and never while holding the GIL. Two clients share one core:

* :class:`Client` for asyncio::

      async with Client.connect("redis+sentinel://127.0.0.1:26379/mymaster") as client:
          await client.execute("SET", "key", "value")
          async for event in client.events():
              print(event["kind"])  # typed: see Event, Topology

* :class:`BlockingClient` for threads; it releases the GIL while it waits::

      with BlockingClient.connect("redis+sentinel://127.0.0.1:26379/mymaster") as client:
          client.execute("GET", "key")

Options are the URL's query keys (``command_timeout_ms=2000``, ``read_from="replica"``, ...),
given as keyword arguments; they override the URL. ``decode_responses=True`` returns ``str``
instead of ``bytes``. Errors are subclasses of :class:`Error` with a stable ``code``. Log records
of the core go to the :mod:`logging` logger ``sentinel_recovery``.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
from typing import Any, Callable, Dict, Generator, List, Optional, Sequence, Tuple, Union

from . import _doctor, _errors, _native, _pubsub, _types
from ._doctor import DoctorFinding, DoctorReport, DoctorStatus, DoctorVerdict
from ._errors import (
    AuthError,
    ClosedError,
    ConfigError,
    ConnectionLostError,
    Error,
    NoHealthyPrimaryError,
    ProtocolError,
    QueueFullError,
    SentinelsUnreachableError,
    ServerError,
    ServiceUnknownError,
    TimeoutError,
    TlsError,
    InternalError,
    NotReplicatedError,
    _make_error,
)
from ._native import set_worker_threads
from ._pubsub import AsyncSubscription, Message, Name, Subscription
from ._tables import ERROR_CODES, EVENT_KINDS
from ._types import (
    Address,
    AnnouncedAddress,
    ConnectionLostEvent,
    ConnectionRestoredEvent,
    DiscoveryFailedEvent,
    ErrorInfo,
    Event,
    EventKind,
    FailoverStartedEvent,
    PrimaryChangedEvent,
    ReplicasChangedEvent,
    SentinelDownEvent,
    SentinelInfo,
    SentinelMajorityLostEvent,
    SentinelMajorityRegainedEvent,
    SentinelServiceUnknownEvent,
    SentinelsChangedEvent,
    SentinelTiltEvent,
    SentinelUpEvent,
    SubscriptionLostEvent,
    SubscriptionRestoredEvent,
    Topology,
)

__all__ = [
    "Client",
    "BlockingClient",
    "AsyncEvents",
    "Events",
    # Pub/sub, listed once in _pubsub.
    *_pubsub.__all__,
    "Transaction",
    "BlockingTransaction",
    "Arg",
    "set_worker_threads",
    "doctor",
    "doctor_blocking",
    "AddressMapFn",
    *_doctor.__all__,
    "ERROR_CODES",
    "EVENT_KINDS",
    # The shapes of the topology and of events, listed once in _types.
    *_types.__all__,
    # The exception classes, listed once in _errors.
    *_errors.__all__,
]

__version__: str = _native.__version__

#: A command argument: bytes-like, or str (UTF-8); int in decimal; float as its shortest
#: round-trip text (``2``, ``0.1``, ``1e+21``), ``inf`` / ``-inf`` for infinities. The policy of
#: every binding: a NaN, or a str with a lone surrogate, raises :class:`ConfigError` naming the
#: argument (0 is the command's name); so does an argument over 512 MiB (Redis's
#: proto-max-bulk-len). Nothing of a refused command is sent.
Arg = Union[bytes, bytearray, memoryview, str, int, float]
#: ``address_map``'s function form, like ioredis' ``natMap``: called with each address a
#: sentinel reports (primary, replicas, other sentinels; never the sentinels of the URL) as
#: ``{"host": ..., "port": ...}``; returns the address to connect to instead (a dict or a
#: ``(host, port)`` tuple), or ``None`` to use it as reported. It runs on a core thread, holding
#: the GIL for the call: keep it quick (a dict lookup) and never block in it. An exception in it
#: is logged (logger ``sentinel_recovery``) and the reported address is used. An ``address_map``
#: string (``"10.0.0.5:6379>127.0.0.1:16379,..."``) is the option's fixed form.
AddressMapFn = Callable[[Address], Optional[Union[Address, Tuple[str, int]]]]
OptionValue = Union[str, int, float, bool, "os.PathLike[str]", AddressMapFn, None]

_LOGGER = logging.getLogger("sentinel_recovery")
_LOGGER.addHandler(logging.NullHandler())  # the application decides where records go
_native._set_error_factory(_make_error)
_native._set_log_level(_LOGGER.getEffectiveLevel())
atexit.register(_native._shutdown)


def _option_text(key: str, value: OptionValue) -> str:
    """An option value as the text the core parses (the core checks it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    raise TypeError(f"option {key}: expected str, int, float, bool or a path, got {type(value).__name__}")


def _pairs(options: Dict[str, OptionValue]) -> "Tuple[list, Optional[AddressMapFn]]":
    """The options as (key, text) pairs, and ``address_map`` apart when it is a function."""
    options = dict(options)
    address_map = options.get("address_map")
    function: Optional[AddressMapFn] = None
    if callable(address_map):
        function = options.pop("address_map")  # type: ignore[assignment]
    return [(key, _option_text(key, value)) for key, value in options.items()], function


def _open(url: str, decode_responses: bool, options: Dict[str, OptionValue]) -> "_native.NativeClient":
    if not isinstance(url, str):
        raise TypeError("url must be a str")
    pairs, address_map = _pairs(options)
    _native._set_log_level(_LOGGER.getEffectiveLevel())
    return _native.NativeClient.open(url, pairs, bool(decode_responses), address_map)


async def doctor(
    url: str,
    *,
    watch: Optional[float] = None,
    pings: Optional[int] = None,
    **options: OptionValue,
) -> DoctorReport:
    """Diagnoses the deployment of ``url`` (``sentinel-recovery doctor``), without blocking the loop.

    ``options`` are a client's (``sentinel_password``, ``tls_ca_file``, ``address_map`` as text
    or function, ...). ``watch`` (seconds) samples a PING every 100 ms per sentinel for that long
    to see loop stalls; ``pings`` sets the PINGs per sentinel for the round-trip figures (10).
    Raises :class:`ConfigError` (bad URL or option) and the like only when no diagnosis is
    possible; every problem of the deployment is in the report. Cancelling the awaiting task
    stops the diagnosis.
    """
    if not isinstance(url, str):
        raise TypeError("url must be a str")
    pairs, address_map = _pairs(options)
    _native._set_log_level(_LOGGER.getEffectiveLevel())
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    operation = _native.doctor_async(loop, fut, url, pairs, watch, pings, address_map)
    return DoctorReport._from_native(await _settled(fut, operation))


def doctor_blocking(
    url: str,
    *,
    watch: Optional[float] = None,
    pings: Optional[int] = None,
    **options: OptionValue,
) -> DoctorReport:
    """:func:`doctor` for threads: waits with the GIL released (Ctrl-C interrupts it)."""
    if not isinstance(url, str):
        raise TypeError("url must be a str")
    pairs, address_map = _pairs(options)
    _native._set_log_level(_LOGGER.getEffectiveLevel())
    return DoctorReport._from_native(_native.doctor_blocking(url, pairs, watch, pings, address_map))


class AsyncEvents:
    """An async iterator over a client's events (:data:`Event` dicts), from the moment it was created.

    Ends when the client is closed. ``await events.aclose()`` (or leaving ``async with``) stops it.
    Events reach the loop through ``loop.call_soon_threadsafe``, in the order they happened.
    """

    def __init__(self, native: "_native.NativeClient") -> None:
        loop = asyncio.get_running_loop()
        self._queue: "asyncio.Queue[Optional[Event]]" = asyncio.Queue()
        self._done = False
        self._subscription = native.subscribe_async(loop, self._queue)

    def __aiter__(self) -> "AsyncEvents":
        return self

    async def __anext__(self) -> Event:
        if self._done:
            raise StopAsyncIteration
        item = await self._queue.get()
        if item is None:
            self._finish()
            raise StopAsyncIteration
        return item

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._subscription.cancel()
            self._queue.put_nowait(None)  # wakes a consumer waiting in __anext__

    async def aclose(self) -> None:
        """Stops the subscription; a pending ``__anext__`` ends the iteration."""
        self._finish()

    async def __aenter__(self) -> "AsyncEvents":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._finish()


class Client:
    """An asyncio client of one Sentinel-managed service.

    Create it with ``await Client.connect(url, **options)`` (waits for the first discovery) or
    ``Client.open(url, **options)`` (returns at once). All methods may be called from the event
    loop: none of them blocks it. Use it from the loop it was used first with; completions are
    delivered to the loop that awaits them.
    """

    __slots__ = ("_native",)

    def __init__(self, native: "_native.NativeClient") -> None:
        """Internal: use :meth:`connect` or :meth:`open`."""
        self._native = native

    @classmethod
    def open(cls, url: str, *, decode_responses: bool = False, **options: OptionValue) -> "Client":
        """Opens a client and returns at once; discovery runs in the background.

        Commands issued before the primary is known wait for it (bounded by ``queue_size`` and
        ``command_timeout_ms``). Raises :class:`ConfigError` for a bad URL or option.
        """
        return cls(_open(url, decode_responses, options))

    @classmethod
    def connect(cls, url: str, *, decode_responses: bool = False, **options: OptionValue) -> "_Connecting":
        """Opens a client and waits for the first discovery round.

        Use as ``client = await Client.connect(...)`` or ``async with Client.connect(...) as
        client:``. Raises :class:`SentinelsUnreachableError`, :class:`ServiceUnknownError` or
        :class:`NoHealthyPrimaryError` when no primary is found (the client is closed then), and
        :class:`ConfigError` for a bad URL or option.
        """
        return _Connecting(cls, url, decode_responses, options)

    async def ready(self) -> Topology:
        """Waits for the first discovery round; returns the topology or raises its error."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        return await _settled(fut, self._native.ready_async(loop, fut))

    async def execute(self, *args: Arg, timeout: Optional[float] = None) -> Any:
        """Runs one command on the primary (or a replica for reads, per ``read_from``).

        Returns the reply: ``None``, ``int``, ``float``, ``bool``, ``bytes`` (``str`` with
        ``decode_responses=True``), ``list``, ``dict`` or ``set``. Raises :class:`ServerError`
        for an error reply, :class:`TimeoutError`, :class:`ConnectionLostError` (the command may
        have run), :class:`QueueFullError`, :class:`ClosedError`, ... ``timeout`` (seconds)
        replaces the ``command_timeout_ms`` option for this call and ends it whatever the
        command (``BLPOP k 0`` included: its connection is closed, so the server stops blocking
        it); without it a blocking command may block as long as it asked the server. Cancelling the awaiting task
        cancels the command in the core (one already sent may still have run).
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        return await _settled(fut, self._native.execute_async(loop, fut, args, timeout))

    async def pipeline(self, commands: Sequence[Sequence[Arg]], *, timeout: Optional[float] = None) -> List[Any]:
        """Sends ``commands`` back to back on one connection and returns one result per command,
        in order: its reply, or the exception of its own error (e.g. a :class:`ServerError` for
        WRONGTYPE) in its place, not raised. Not atomic (see :meth:`transaction`). Raises only
        when the pipeline failed as a whole (no primary within the deadline, a command a pipeline
        can't carry such as BLPOP or MULTI: nothing sent). ``timeout`` (seconds) is the whole
        pipeline's deadline. Cancelling the awaiting task cancels it (commands already sent may
        have run; nothing is retried).
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        cmds = [tuple(c) for c in commands]
        return await _settled(fut, self._native.pipeline_async(loop, fut, cmds, timeout))

    async def transaction(
        self, commands: Sequence[Sequence[Arg]], *, watch: Sequence[Arg] = ()
    ) -> Optional[List[Any]]:
        """Runs ``commands`` atomically (MULTI ... EXEC) on a dedicated connection to the primary,
        after ``WATCH watch...`` when given. Returns one reply per command (a command that failed
        inside EXEC is a :class:`ServerError` instance in its place), or ``None`` when a watched
        key changed (nothing ran). Raises :class:`ConnectionLostError` ("nothing was applied")
        when the primary changed meanwhile. To read watched keys before EXEC, use
        :meth:`begin_transaction`.
        """
        async with await self.begin_transaction() as tx:
            if watch:
                await tx.watch(*watch)
            return await tx.exec(commands)

    async def begin_transaction(self) -> "Transaction":
        """Begins a transaction on a dedicated connection to the current primary (waiting for
        one like a command): ``async with await client.begin_transaction() as tx:``, then
        ``await tx.watch(key)``, ``await tx.execute("GET", key)``, ``await tx.exec([...])``.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        return Transaction(await _settled(fut, self._native.begin_transaction_async(loop, fut)))

    def topology(self) -> Topology:
        """The current topology snapshot; never waits."""
        return self._native.topology()

    def events(self) -> AsyncEvents:
        """An async iterator over events from now on: ``async for event in client.events()``."""
        return AsyncEvents(self._native)

    async def subscribe(
        self, *channels: Name, patterns: "tuple[Name, ...]" = (), buffer: Optional[int] = None
    ) -> AsyncSubscription:
        """Subscribes to ``channels`` (and ``patterns``) on a connection of its own and returns once
        the node confirmed them: ``async for message in await client.subscribe("news")``.

        The subscription follows failovers; ``subscription_lost`` / ``subscription_restored``
        events tell when messages were missed (pub/sub is at-most-once). ``buffer`` messages wait
        at most (default 4096); beyond that the newest are dropped and counted (``dropped``).
        """
        return await _pubsub._open_async(self._native, channels, patterns, buffer)

    async def psubscribe(self, *patterns: Name, buffer: Optional[int] = None) -> AsyncSubscription:
        """Subscribes to glob-style ``patterns`` (see :meth:`subscribe`)."""
        return await _pubsub._open_async(self._native, (), patterns, buffer)

    def refresh(self) -> None:
        """Asks for a discovery round now."""
        self._native.refresh()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    @property
    def queued(self) -> int:
        """Commands now waiting for a usable node."""
        return self._native.queued

    async def close(self) -> None:
        """Closes the client: event iterators end, and every command still in flight fails with
        :class:`ClosedError` before this returns. Idempotent.
        """
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._native.close_async(loop, fut)
        await fut

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = " closed" if self._native.closed else ""
        return f"<sentinel_recovery.Client {self._native.url}{state}>"


async def _settled(fut: "asyncio.Future[Any]", operation: "_native.Operation") -> Any:
    """Awaits the future of a core operation; cancelling the awaiting task cancels the operation."""
    try:
        return await fut
    except asyncio.CancelledError:
        operation.cancel()
        raise


class _Connecting:
    """The result of :meth:`Client.connect`: awaitable, and usable with ``async with``."""

    __slots__ = ("_cls", "_url", "_decode", "_options", "_client")

    def __init__(self, cls: type, url: str, decode: bool, options: Dict[str, OptionValue]) -> None:
        self._cls = cls
        self._url = url
        self._decode = decode
        self._options = options
        self._client: Optional[Client] = None

    async def _connect(self) -> Client:
        client = self._cls.open(self._url, decode_responses=self._decode, **self._options)
        try:
            await client.ready()
        except BaseException:
            await client.close()
            raise
        return client

    def __await__(self) -> Generator[Any, None, Client]:
        return self._connect().__await__()

    async def __aenter__(self) -> Client:
        self._client = await self._connect()
        return self._client

    async def __aexit__(self, *exc: Any) -> None:
        if self._client is not None:
            await self._client.close()


class Events:
    """A blocking iterator over a client's events (:data:`Event` dicts), from the moment it was created.

    Each wait releases the GIL. Ends when the client is closed or :meth:`close` is called.
    """

    __slots__ = ("_iter",)

    def __init__(self, native: "_native.NativeClient") -> None:
        self._iter = native.subscribe_blocking()

    def __iter__(self) -> "Events":
        return self

    def __next__(self) -> Event:
        return self._iter.__next__()

    def next(self, timeout: Optional[float] = None) -> Optional[Event]:
        """The next event, waiting at most ``timeout`` seconds; ``None`` on timeout.

        Raises ``StopIteration`` once the stream has ended.
        """
        return self._iter.next(timeout)

    def close(self) -> None:
        """Stops the iterator."""
        self._iter.close()

    def __enter__(self) -> "Events":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class BlockingClient:
    """A client for threaded code: every call blocks only the calling thread, with the GIL released.

    Create it with ``BlockingClient.connect(url, **options)`` (waits for the first discovery) or
    ``BlockingClient.open(url, **options)`` (returns at once). Safe to share between threads.
    """

    __slots__ = ("_native",)

    def __init__(self, native: "_native.NativeClient") -> None:
        """Internal: use :meth:`connect` or :meth:`open`."""
        self._native = native

    @classmethod
    def open(cls, url: str, *, decode_responses: bool = False, **options: OptionValue) -> "BlockingClient":
        """Opens a client and returns at once; discovery runs in the background."""
        return cls(_open(url, decode_responses, options))

    @classmethod
    def connect(cls, url: str, *, decode_responses: bool = False, **options: OptionValue) -> "BlockingClient":
        """Opens a client and waits (GIL released) for the first discovery round.

        Raises :class:`SentinelsUnreachableError`, :class:`ServiceUnknownError` or
        :class:`NoHealthyPrimaryError` when no primary is found (the client is closed then).
        """
        client = cls.open(url, decode_responses=decode_responses, **options)
        try:
            client.ready()
        except BaseException:
            client.close()
            raise
        return client

    def ready(self) -> Topology:
        """Waits for the first discovery round; returns the topology or raises its error."""
        return self._native.ready_blocking()

    def execute(self, *args: Arg, timeout: Optional[float] = None) -> Any:
        """Runs one command and returns its reply (see :meth:`Client.execute`).

        ``timeout`` (seconds) replaces the ``command_timeout_ms`` option for this call and ends
        it whatever the command, as in :meth:`Client.execute`. The wait
        releases the GIL and still handles signals: Ctrl-C raises ``KeyboardInterrupt`` within
        about 50 ms (also in ``BLPOP key 0``) and cancels the command.
        """
        return self._native.execute_blocking(args, timeout)

    def pipeline(self, commands: Sequence[Sequence[Arg]], *, timeout: Optional[float] = None) -> List[Any]:
        """Sends ``commands`` back to back and returns one result per command, each its reply or
        its error's exception in its place (see :meth:`Client.pipeline`)."""
        return self._native.pipeline_blocking([tuple(c) for c in commands], timeout)

    def transaction(self, commands: Sequence[Sequence[Arg]], *, watch: Sequence[Arg] = ()) -> Optional[List[Any]]:
        """MULTI ... EXEC after an optional WATCH (see :meth:`Client.transaction`)."""
        with self.begin_transaction() as tx:
            if watch:
                tx.watch(*watch)
            return tx.exec(commands)

    def begin_transaction(self) -> "BlockingTransaction":
        """Begins a transaction on a dedicated connection to the current primary (see
        :meth:`Client.begin_transaction`); use it as a context manager."""
        return BlockingTransaction(self._native.begin_transaction_blocking())

    def topology(self) -> Topology:
        """The current topology snapshot; never waits."""
        return self._native.topology()

    def events(self) -> Events:
        """A blocking iterator over events from now on."""
        return Events(self._native)

    def subscribe(
        self, *channels: Name, patterns: "tuple[Name, ...]" = (), buffer: Optional[int] = None
    ) -> Subscription:
        """Subscribes and waits (GIL released) for the confirmation; iterate the result for
        messages (see :meth:`Client.subscribe`)."""
        return _pubsub._open_blocking(self._native, channels, patterns, buffer)

    def psubscribe(self, *patterns: Name, buffer: Optional[int] = None) -> Subscription:
        """Subscribes to glob-style ``patterns`` (see :meth:`subscribe`)."""
        return _pubsub._open_blocking(self._native, (), patterns, buffer)

    def on_event(self, callback: Optional[Callable[[Event], None]]) -> None:
        """Calls ``callback(event)`` for each event, on a background thread of this module (never
        on a core thread), one call at a time, in order. Replaces an earlier callback; ``None``
        removes it. When this (or :meth:`close`) returns, the earlier callback is no longer called
        (called from inside that callback, its current call finishes first). The callback may
        close its own client. Exceptions raised by the callback are reported with
        ``sys.unraisablehook`` and later events are still delivered. Beyond 65 536 events waiting
        for the callback the newest are dropped, and their number logged as a warning in their place.
        """
        self._native.set_event_callback(callback)

    def refresh(self) -> None:
        """Asks for a discovery round now."""
        self._native.refresh()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._native.closed

    @property
    def queued(self) -> int:
        """Commands now waiting for a usable node."""
        return self._native.queued

    def close(self) -> None:
        """Closes the client; idempotent. Every command still in flight fails with
        :class:`ClosedError` before this returns, and no event callback runs after it."""
        self._native.close_blocking()

    def __enter__(self) -> "BlockingClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = " closed" if self._native.closed else ""
        return f"<sentinel_recovery.BlockingClient {self._native.url}{state}>"


class Transaction:
    """A transaction begun with :meth:`Client.begin_transaction`, on a dedicated connection to
    the primary it began on. ``exec`` ends it; leaving ``async with`` without ``exec`` discards it.
    ``exec`` raises :class:`ConnectionLostError` ("nothing was applied") when the primary changed
    since the transaction began: begin again on the new primary.
    """

    __slots__ = ("_native",)

    def __init__(self, native: "_native.NativeTransaction") -> None:
        """Internal: use :meth:`Client.begin_transaction`."""
        self._native = native

    @property
    def primary(self) -> str:
        """The primary (``host:port``) the transaction runs on."""
        return self._native.primary

    async def watch(self, *keys: Arg) -> None:
        """``WATCH keys...``: :meth:`exec` then returns ``None`` if any of them changed."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        await _settled(fut, self._native.watch_async(loop, fut, keys))

    async def execute(self, *args: Arg) -> Any:
        """Runs one command now on the transaction's connection (a read between WATCH and EXEC)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        return await _settled(fut, self._native.execute_async(loop, fut, args))

    async def exec(self, commands: Sequence[Sequence[Arg]]) -> Optional[List[Any]]:
        """MULTI, ``commands``, EXEC: one reply per command, or ``None`` when a watched key
        changed (nothing ran). Ends the transaction."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        return await _settled(fut, self._native.exec_async(loop, fut, [tuple(c) for c in commands]))

    def discard(self) -> None:
        """Ends the transaction without running anything. Idempotent."""
        self._native.discard()

    async def __aenter__(self) -> "Transaction":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.discard()


class BlockingTransaction:
    """:class:`Transaction` for :class:`BlockingClient`: the same steps, each blocking the calling
    thread only (GIL released); a context manager that discards on exit without ``exec``."""

    __slots__ = ("_native",)

    def __init__(self, native: "_native.NativeTransaction") -> None:
        """Internal: use :meth:`BlockingClient.begin_transaction`."""
        self._native = native

    @property
    def primary(self) -> str:
        """The primary (``host:port``) the transaction runs on."""
        return self._native.primary

    def watch(self, *keys: Arg) -> None:
        """``WATCH keys...``."""
        self._native.watch_blocking(keys)

    def execute(self, *args: Arg) -> Any:
        """Runs one command now on the transaction's connection."""
        return self._native.execute_blocking(args)

    def exec(self, commands: Sequence[Sequence[Arg]]) -> Optional[List[Any]]:
        """MULTI, ``commands``, EXEC (see :meth:`Transaction.exec`)."""
        return self._native.exec_blocking([tuple(c) for c in commands])

    def discard(self) -> None:
        """Ends the transaction without running anything. Idempotent."""
        self._native.discard()

    def __enter__(self) -> "BlockingTransaction":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.discard()
