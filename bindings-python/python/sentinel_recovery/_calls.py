"""Options, the opening of a native client and the settling of a core operation: what the
asyncio and blocking clients, the transactions, the doctor and the redis-py adapters share."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable, Dict, Optional, Tuple, Union

from . import _native
from ._types import Address


_LOGGER = logging.getLogger("sentinel_recovery")

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


async def _settled(fut: "asyncio.Future[Any]", operation: "_native.Operation") -> Any:
    """The awaitable every native ``*_async`` method returns (the native side calls this with the
    future it created): awaits the future of a core operation; cancelling the awaiting task
    cancels the operation."""
    try:
        return await fut
    except asyncio.CancelledError:
        operation.cancel()
        raise
