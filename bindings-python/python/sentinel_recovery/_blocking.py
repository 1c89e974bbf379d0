"""The blocking client for threads: :class:`BlockingClient` and its event iterator."""

from __future__ import annotations

from typing import Any, Callable, List, Optional, Sequence

from . import _native, _pubsub
from ._calls import Arg, OptionValue, _open
from ._pubsub import Name, Subscription
from ._transaction import BlockingTransaction
from ._types import Event, Topology


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

    def transaction(
        self,
        commands: Sequence[Sequence[Arg]],
        *,
        watch: Sequence[Arg] = (),
        timeout: Optional[float] = None,
    ) -> Optional[List[Any]]:
        """MULTI ... EXEC after an optional WATCH (see :meth:`Client.transaction`); ``timeout``
        (seconds) bounds the whole transaction, until EXEC's reply, as there."""
        return self._native.transaction_blocking([tuple(c) for c in commands], tuple(watch), timeout)

    def begin_transaction(self, *, timeout: Optional[float] = None) -> "BlockingTransaction":
        """Begins a transaction on a dedicated connection to the current primary (see
        :meth:`Client.begin_transaction`); use it as a context manager. ``timeout`` (seconds)
        bounds the whole transaction, until ``exec`` completes, as there."""
        return BlockingTransaction(self._native.begin_transaction_blocking(timeout))

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
