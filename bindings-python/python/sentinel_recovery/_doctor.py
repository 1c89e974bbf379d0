"""``doctor``: the diagnosis of ``sentinel-recovery doctor`` as a Python API.

:func:`doctor` (asyncio) and :func:`doctor_blocking` (threads; the GIL is released while it
waits) diagnose the deployment a URL describes, on the core's own connections with the same
options as a client (credentials, TLS, DNS, ``address_map``), and return a :class:`DoctorReport`.
Its ``data`` is the report's JSON form (schema 1, documented in the core's ``doctor::report``);
the fields most callers need are typed here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, TypedDict

from . import _native
from ._calls import _LOGGER, OptionValue, _pairs

__all__ = ["DoctorReport", "DoctorFinding", "DoctorVerdict", "DoctorStatus"]

#: The overall judgement: exit code 0, 1 and 2 of the CLI.
DoctorStatus = Literal["healthy", "warning", "failure"]


class DoctorVerdict(TypedDict):
    """``report["verdict"]``."""

    status: DoctorStatus
    exit_code: int
    #: The title of the first failure mode, or ``"healthy"``.
    headline: str
    #: Failure modes (``loop_stall``, ``name_resolution``, ``quorum``, ...), most consequential first.
    modes: List[str]


class DoctorFinding(TypedDict):
    """One entry of ``report["findings"]``."""

    severity: Literal["warning", "failure"]
    mode: str
    #: Stable id, e.g. ``sentinel_tilt``, ``address_unreachable``.
    code: str
    #: The endpoint concerned (``host:port``), if any.
    subject: Optional[str]
    #: What was found, with the numbers that prove it.
    message: str
    #: One line: what to do.
    hint: str


@dataclass(frozen=True)
class DoctorReport:
    """A finished diagnosis."""

    #: ``"healthy"``, ``"warning"`` or ``"failure"``.
    status: DoctorStatus
    #: 0 healthy, 1 warnings, 2 failures (the CLI's exit code).
    exit_code: int
    #: The human form, as ``sentinel-recovery doctor`` prints it.
    text: str
    #: The JSON text (``sentinel-recovery doctor --json``).
    json: str
    #: ``json`` parsed: ``verdict``, ``findings``, ``sentinels``, ``agreement``, ``quorum``,
    #: ``names``, ``data_nodes``, ``timing``, ...
    data: Dict[str, Any]

    @property
    def verdict(self) -> DoctorVerdict:
        """The verdict."""
        return self.data["verdict"]  # type: ignore[no-any-return]

    @property
    def findings(self) -> List[DoctorFinding]:
        """What is wrong or at risk, most consequential first."""
        return self.data["findings"]  # type: ignore[no-any-return]

    def finding(self, code: str, subject: Optional[str] = None) -> Optional[DoctorFinding]:
        """The first finding with this ``code`` (and ``subject``, when given)."""
        for f in self.findings:
            if f["code"] == code and (subject is None or f["subject"] == subject):
                return f
        return None

    @classmethod
    def _from_native(cls, native: Any) -> "DoctorReport":
        text_json, text, status, exit_code = native
        return cls(status=status, exit_code=exit_code, text=text, json=text_json, data=json.loads(text_json))


async def doctor(
    url: str,
    *,
    watch: Optional[float] = None,
    pings: Optional[int] = None,
    **options: OptionValue,
) -> DoctorReport:
    """Diagnoses the deployment of ``url`` (``sentinel-recovery doctor``), without blocking the loop.

    ``options`` are a client's (``sentinel_password``, ``tls_ca_file``, ``address_map`` as text
    or function, ...). ``watch`` (seconds, more than 0 and at most 3600) samples a PING every
    100 ms per sentinel for that long to see loop stalls; ``pings`` (1 to 1000, default 10) sets
    the PINGs per sentinel for the round-trip figures. Out of range they raise
    :class:`ConfigError` naming the option (the rule every binding keeps).
    Raises :class:`ConfigError` (bad URL or option) and the like only when no diagnosis is
    possible; every problem of the deployment is in the report. Cancelling the awaiting task
    stops the diagnosis.
    """
    if not isinstance(url, str):
        raise TypeError("url must be a str")
    pairs, address_map = _pairs(options)
    _native._set_log_level(_LOGGER.getEffectiveLevel())
    return DoctorReport._from_native(await _native.doctor_async(url, pairs, watch, pings, address_map))


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
