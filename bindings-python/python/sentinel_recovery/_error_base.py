"""The base class of every exception of sentinel_recovery (the class of each code, one subclass per
code, is generated from the core's table: ``_error_classes``)."""

from __future__ import annotations

from typing import Optional


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
        from ._errors import _make_error  # the class of each code is known there

        return (_make_error, (self.code, self.message, self.server_code))
