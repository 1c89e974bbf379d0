"""The exception hierarchy: one base class with a stable ``code``, one subclass per code.

The codes are shared by every language binding of sentinel-recovery and listed once, in the core;
``_tables.ERROR_CODES`` is generated from that list (``cargo run -p xtask -- tables``). The classes
below give each code its documented name and built-in bases; :data:`_BY_CODE` is built from the
table, so every code of the table has a class (one the table lists and this file does not name
gets a generated ``<Code>Error``), and the test suite checks the table against the core's at run
time and the classes against the table.
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Tuple, Type

from ._tables import ERROR_CODES

__all__ = [
    "Error",
    "ConfigError",
    "SentinelsUnreachableError",
    "ServiceUnknownError",
    "NoHealthyPrimaryError",
    "TimeoutError",
    "ConnectionLostError",
    "ServerError",
    "ProtocolError",
    "TlsError",
    "AuthError",
    "ClosedError",
    "QueueFullError",
    "InternalError",
    "NotReplicatedError",
]


class Error(Exception):
    """Base class of every error raised by sentinel_recovery.

    Attributes:
        code: the stable error code (``"timeout"``, ``"server"``, ...), the same in every language.
        message: the human-readable message (never contains a secret).
        server_code: for server error replies, the first word of the reply (``"WRONGTYPE"``,
            ``"READONLY"``, ``"ERR"``, ...); ``None`` otherwise.
    """

    code: str = "error"

    def __init__(self, message: str = "", server_code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.server_code = server_code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"

    def __reduce__(self):  # picklable across processes (multiprocessing)
        return (_make_error, (self.code, self.message, self.server_code))


class ConfigError(Error, ValueError):
    """The URL or an option is invalid; the message names the offending part."""

    code = "config"


class SentinelsUnreachableError(Error):
    """No configured or learned sentinel could be reached within the deadline."""

    code = "sentinels_unreachable"


class ServiceUnknownError(Error):
    """Every sentinel that answered said it does not monitor the service."""

    code = "service_unknown"


class NoHealthyPrimaryError(Error):
    """Sentinels know the service but none reported a primary that is up and verified."""

    code = "no_healthy_primary"


class TimeoutError(Error, builtins.TimeoutError):
    """An operation did not finish before its deadline (also a built-in ``TimeoutError``)."""

    code = "timeout"


class ConnectionLostError(Error, builtins.ConnectionError):
    """The connection broke while a request was in flight; the command may or may not have run."""

    code = "connection_lost"


class ServerError(Error):
    """The server answered with an error reply; see ``server_code``."""

    code = "server"


class ProtocolError(Error):
    """The peer sent something that is not valid RESP or not the expected shape."""

    code = "protocol"


class TlsError(Error):
    """TLS setup or handshake failed."""

    code = "tls"


class AuthError(Error):
    """The server refused the credentials."""

    code = "auth"


class ClosedError(Error):
    """The client was closed."""

    code = "closed"


class QueueFullError(Error):
    """The bounded queue of commands waiting for a primary is full (option ``queue_size``)."""

    code = "queue_full"


class InternalError(Error):
    """A bug in sentinel-recovery, caught (a panic in the core): the operation failed, the process
    goes on. Please report it."""

    code = "internal"


class NotReplicatedError(Error):
    """With ``wait_replicas``: the write ran on the primary, but fewer replicas than asked
    confirmed it within ``wait_timeout_ms``, so a failover may lose it. Never retried: it ran."""

    code = "not_replicated"


_NAMED: Tuple[Type[Error], ...] = (
    ConfigError,
    SentinelsUnreachableError,
    ServiceUnknownError,
    NoHealthyPrimaryError,
    TimeoutError,
    ConnectionLostError,
    ServerError,
    ProtocolError,
    TlsError,
    AuthError,
    ClosedError,
    QueueFullError,
    InternalError,
    NotReplicatedError,
)


def _class_name(code: str) -> str:
    return "".join(part.capitalize() for part in code.split("_")) + "Error"


def _build(table: Tuple[Tuple[str, int, str], ...]) -> Dict[str, Type[Error]]:
    """One class per code of the table: the named one, else a generated subclass of Error."""
    named = {cls.code: cls for cls in _NAMED}
    by_code: Dict[str, Type[Error]] = {}
    for code, _value, description in table:
        cls = named.get(code)
        if cls is None:
            doc = description[:1].upper() + description[1:] + "."
            cls = type(_class_name(code), (Error,), {"__doc__": doc, "code": code, "__module__": __name__})
        by_code[code] = cls
    return by_code


#: Every code of the core's table and its class.
_BY_CODE: Dict[str, Type[Error]] = _build(ERROR_CODES)


def _make_error(code: str, message: str, server_code: Optional[str] = None) -> Error:
    """Builds the exception for a core error (called by the native module)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = Error(message, server_code)
        err.code = code
        return err
    return cls(message, server_code)
