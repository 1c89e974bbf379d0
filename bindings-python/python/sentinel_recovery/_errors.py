"""The exception hierarchy: one base class with a stable ``code``, one subclass per code.

The codes are shared by every language binding of sentinel-recovery and listed once, in the core;
``_tables.ERROR_CODES`` and the classes of ``_error_classes`` (the subclass of each code, its
built-in bases, :data:`_BY_CODE`) are generated from that list (``cargo run -p xtask -- tables``),
and the test suite checks the table against the core's at run time. The base class is
``_error_base``'s.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from . import _error_classes
from ._error_base import Error
from ._error_classes import *  # noqa: F401,F403 (the class of each code, re-exported)

__all__ = ["Error"]
__all__ += _error_classes.__all__

#: Every code of the core's table and its class.
_BY_CODE: Dict[str, Type[Error]] = _error_classes.BY_CODE


def _make_error(code: str, message: str, server_code: Optional[str] = None) -> Error:
    """Builds the exception for a core error (called by the native module)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = Error(message, server_code)
        err.code = code
        return err
    return cls(message, server_code)
