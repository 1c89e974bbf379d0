"""The asyncio client: :class:`Client`, its event iterator and its ``connect``."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, Generator, List, Optional, Sequence

from . import _native, _pubsub
from ._calls import Arg, OptionValue, _open
from ._pubsub import AsyncSubscription, Name
from ._transaction import Transaction
from ._types import Event, Topology


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
        return await self._native.ready_async()

    async def execute(self, *args: Arg, timeout: Optional[float] = None) -> Any:
        """Runs one command on the primary (or a replica for reads, per ``read_from``).

        Returns the reply: ``None``, ``int``, ``float``, ``bool``, ``bytes`` (``str`` with
        ``decode_responses=True``), ``list``, ``dict`` or ``set``. Raises :class:`ServerError`
        for an error reply, :class:`TimeoutError`, :class:`ConnectionLostError` (the command may
        have run), :class:`QueueFullError`, :class:`ClosedError`, ... ``timeout`` (seconds)
        replaces the ``command_timeout_ms`` option for this call and ends it whatever the
        command (``BLPOP k 0`` included: its connection is closed, so the server stops blocking
        it); without it a blocking command may block as long as it asked the server. A
        ``timeout`` must be more than 0 and at most 2147483.647 seconds (the rule every binding
        shares): 0, negative, NaN or infinite values raise :class:`ConfigError` and nothing is
        sent. Cancelling the awaiting task cancels the command in the core (one already sent
        may still have run).
        """
        return await self._native.execute_async(args, timeout)

    async def pipeline(self, commands: Sequence[Sequence[Arg]], *, timeout: Optional[float] = None) -> List[Any]:
        """Sends ``commands`` back to back on one connection and returns one result per command,
        in order: its reply, or the exception of its own error (e.g. a :class:`ServerError` for
        WRONGTYPE) in its place, not raised. Not atomic (see :meth:`transaction`). Raises only
        when the pipeline failed as a whole (no primary within the deadline, a command a pipeline
        can't carry such as BLPOP or MULTI: nothing sent). ``timeout`` (seconds, as for
        :meth:`execute`) is the whole pipeline's deadline. Cancelling the awaiting task cancels it (commands already sent may
        have run; nothing is retried).
        """
        return await self._native.pipeline_async([tuple(c) for c in commands], timeout)

    async def transaction(
        self,
        commands: Sequence[Sequence[Arg]],
        *,
        watch: Sequence[Arg] = (),
        timeout: Optional[float] = None,
    ) -> Optional[List[Any]]:
        """Runs ``commands`` atomically (MULTI ... EXEC) on a dedicated connection to the primary,
        after ``WATCH watch...`` when given. Returns one reply per command (a command that failed
        inside EXEC is a :class:`ServerError` instance in its place), or ``None`` when a watched
        key changed (nothing ran). Raises :class:`ConnectionLostError` ("nothing was applied")
        when the primary changed meanwhile. ``timeout`` (seconds, the rule of :meth:`execute`;
        else ``command_timeout_ms``) bounds the whole transaction, from the call until EXEC's
        reply: past it :class:`TimeoutError` is raised and the transaction's connection is closed
        (an EXEC sent but not answered in time may or may not have been applied). A command a
        transaction can't carry (BLPOP, MULTI, ...) raises :class:`ConfigError`, nothing sent.
        To read watched keys before EXEC, use :meth:`begin_transaction`.
        """
        return await self._native.transaction_async([tuple(c) for c in commands], tuple(watch), timeout)

    async def begin_transaction(self, *, timeout: Optional[float] = None) -> "Transaction":
        """Begins a transaction on a dedicated connection to the current primary (waiting for
        one like a command): ``async with await client.begin_transaction() as tx:``, then
        ``await tx.watch(key)``, ``await tx.execute("GET", key)``, ``await tx.exec([...])``.

        ``timeout`` (seconds, the rule of :meth:`execute`) bounds the whole transaction, from
        this call until ``exec`` completes, time between the steps included: each step only has
        what is left, and one started or still running when it runs out raises
        :class:`TimeoutError` and ends the transaction (its connection is closed; later steps
        raise :class:`ConfigError`, "the transaction has ended"). Without it the begin waits up
        to ``command_timeout_ms`` and each step gets ``command_timeout_ms`` of its own.
        """
        return Transaction(await self._native.begin_transaction_async(timeout))

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
        await self._native.close_async()

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    def __repr__(self) -> str:
        state = " closed" if self._native.closed else ""
        return f"<sentinel_recovery.Client {self._native.url}{state}>"


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
