"""The exception hierarchy: one base class with a stable ``code``, one subclass per code.

The codes are shared by every language binding of sentinel-recovery (see DESIGN.md).
"""

from __future__ import annotations

import builtins
from typing import Dict, Optional, Type

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


_BY_CODE: Dict[str, Type[Error]] = {
    cls.code: cls
    for cls in (
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
    )
}


def _make_error(code: str, message: str, server_code: Optional[str] = None) -> Error:
    """Builds the exception for a core error (called by the native module)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = Error(message, server_code)
        err.code = code
        return err
    return cls(message, server_code)
