"""Interactive transactions (WATCH, reads, MULTI/EXEC) for both clients."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence

from . import _native
from ._calls import Arg


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
        await self._native.watch_async(keys)

    async def execute(self, *args: Arg) -> Any:
        """Runs one command now on the transaction's connection (a read between WATCH and EXEC)."""
        return await self._native.execute_async(args)

    async def exec(self, commands: Sequence[Sequence[Arg]]) -> Optional[List[Any]]:
        """MULTI, ``commands``, EXEC: one reply per command, or ``None`` when a watched key
        changed (nothing ran). Ends the transaction."""
        return await self._native.exec_async([tuple(c) for c in commands])

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
