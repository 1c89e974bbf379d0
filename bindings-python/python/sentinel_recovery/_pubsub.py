"""Pub/sub for applications: subscriptions that follow failovers.

A subscription runs on a connection of the core's own (never the one commands share). After a lost
connection or a failover the core subscribes every channel and pattern again on the new node, and
the client's events say so: ``subscription_lost``, then ``subscription_restored`` with ``gap_ms``.
Redis pub/sub is at-most-once: what is published during the gap is not received.

Messages wait in a bounded buffer (``buffer`` messages, 4096 by default); when it is full the newest
are dropped and counted in :attr:`AsyncSubscription.dropped`. ``PUBLISH`` goes through
``execute``.
"""

from __future__ import annotations

from typing import Any, Iterable, List, NamedTuple, Optional, Tuple, Union

from . import _native

__all__ = ["Message", "AsyncSubscription", "Subscription", "Name"]

#: A channel or pattern name: ``str`` (sent as UTF-8) or bytes-like.
Name = Union[str, bytes, bytearray, memoryview]


class Message(NamedTuple):
    """One pub/sub message: ``bytes`` fields, or ``str`` with ``decode_responses=True``."""

    #: The channel it was published to.
    channel: Any
    #: The payload.
    data: Any
    #: The pattern it matched (``psubscribe``), or ``None`` for a channel subscription.
    pattern: Any = None


def _names(names: Iterable[Name], what: str) -> List[bytes]:
    out = []
    for name in names:
        if isinstance(name, str):
            out.append(name.encode("utf-8"))
        elif isinstance(name, (bytes, bytearray, memoryview)):
            out.append(bytes(name))
        else:
            raise TypeError(f"{what} names must be str or bytes, got {type(name).__name__}")
    return out


def _message(item: Optional[Tuple[Any, Any, Any]]) -> Optional[Message]:
    return None if item is None else Message(*item)


async def _open_async(
    client: "_native.NativeClient", channels: Iterable[Name], patterns: Iterable[Name], buffer: Optional[int]
) -> "AsyncSubscription":
    return AsyncSubscription(
        await _native.NativeSubscriber.open_async(
            client, _names(channels, "channel"), _names(patterns, "pattern"), buffer
        )
    )


def _open_blocking(
    client: "_native.NativeClient", channels: Iterable[Name], patterns: Iterable[Name], buffer: Optional[int]
) -> "Subscription":
    return Subscription(
        _native.NativeSubscriber.open_blocking(
            client, _names(channels, "channel"), _names(patterns, "pattern"), buffer
        )
    )


class _Common:
    __slots__ = ("_native",)

    def __init__(self, native: "_native.NativeSubscriber") -> None:
        self._native = native

    @property
    def dropped(self) -> int:
        """Messages dropped because the buffer was full (the newest are dropped)."""
        return self._native.dropped

    @property
    def channels(self) -> List[Any]:
        """The channels subscribed now."""
        return self._native.channels

    @property
    def patterns(self) -> List[Any]:
        """The patterns subscribed now."""
        return self._native.patterns

    @property
    def closed(self) -> bool:
        """Whether the subscription ended (closed, or its client closed)."""
        return self._native.closed


class AsyncSubscription(_Common):
    """A subscription for asyncio: ``async for message in sub`` yields :class:`Message` s in order.

    The iteration ends when the subscription or its client is closed. Create it with
    ``await client.subscribe("a", "b")`` or ``await client.psubscribe("news.*")``.
    """

    __slots__ = ()

    def __aiter__(self) -> "AsyncSubscription":
        return self

    async def __anext__(self) -> Message:
        message = await self.get()
        if message is None:
            raise StopAsyncIteration
        return message

    async def get(self) -> Optional[Message]:
        """The next message, or ``None`` once the subscription ended. Cancelling the awaiting
        task may lose the message it was about to return."""
        return _message(await self._native.next_async())

    async def _change(self, change: str, names: Tuple[Name, ...]) -> None:
        await self._native.change_async(change, _names(names, "channel"))

    async def subscribe(self, *channels: Name) -> None:
        """Adds channels; returns once the node confirmed them (at once while the subscription is
        between nodes: they are subscribed when it is restored)."""
        await self._change("subscribe", channels)

    async def psubscribe(self, *patterns: Name) -> None:
        """Adds glob-style patterns; their messages carry ``pattern``."""
        await self._change("psubscribe", patterns)

    async def unsubscribe(self, *channels: Name) -> None:
        """Removes channels; once this returns no message of theirs is delivered. With no
        argument, ends the whole subscription (as :meth:`close`)."""
        if not channels:
            self.close()
            return
        await self._change("unsubscribe", channels)

    async def punsubscribe(self, *patterns: Name) -> None:
        """Removes patterns, as :meth:`unsubscribe` removes channels."""
        await self._change("punsubscribe", patterns)

    def close(self) -> None:
        """Ends the subscription: a pending iteration ends, the connection closes. Idempotent."""
        self._native.close()

    async def __aenter__(self) -> "AsyncSubscription":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sentinel_recovery.AsyncSubscription channels={self.channels!r} patterns={self.patterns!r}>"


class Subscription(_Common):
    """A subscription for threads: ``for message in sub`` yields :class:`Message` s in order; each
    wait releases the GIL and handles signals (Ctrl-C). Ends when the subscription or its client is
    closed. Create it with ``client.subscribe("a")`` on a :class:`BlockingClient`.
    """

    __slots__ = ()

    def __iter__(self) -> "Subscription":
        return self

    def __next__(self) -> Message:
        message = self.get()
        if message is None:
            raise StopIteration
        return message

    def get(self) -> Optional[Message]:
        """The next message, or ``None`` once the subscription ended."""
        return _message(self._native.next_blocking())

    def subscribe(self, *channels: Name) -> None:
        """Adds channels (see :meth:`AsyncSubscription.subscribe`)."""
        self._native.change_blocking("subscribe", _names(channels, "channel"))

    def psubscribe(self, *patterns: Name) -> None:
        """Adds patterns."""
        self._native.change_blocking("psubscribe", _names(patterns, "pattern"))

    def unsubscribe(self, *channels: Name) -> None:
        """Removes channels; with no argument, ends the subscription (as :meth:`close`)."""
        if not channels:
            self.close()
            return
        self._native.change_blocking("unsubscribe", _names(channels, "channel"))

    def punsubscribe(self, *patterns: Name) -> None:
        """Removes patterns."""
        self._native.change_blocking("punsubscribe", _names(patterns, "pattern"))

    def close(self) -> None:
        """Ends the subscription; a thread waiting in the iteration gets its end. Idempotent."""
        self._native.close()

    def __enter__(self) -> "Subscription":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<sentinel_recovery.Subscription channels={self.channels!r} patterns={self.patterns!r}>"
