"""The shared doctor option cases (tests/cases/doctor_options.tsv; the rule lives in the core's
``doctor::Options::from_host``): ``watch`` (seconds) and ``pings`` of ``doctor_blocking`` and
``doctor``. Accepted: a report comes; refused: ConfigError naming the option, nothing sent."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Tuple

import pytest

import sentinel_recovery as sr
from conftest import case_rows

def load_cases() -> List[Tuple[str, str, str]]:
    cases = [(watch, pings, expect) for watch, pings, expect in case_rows("doctor_options.tsv", 3, 10)]
    for watch, pings, expect in cases:
        assert expect in ("accepted", "refused"), f"{watch} {pings}: expect {expect!r}"
    return cases


CASES = load_cases()


def options_of(case: Tuple[str, str, str]) -> Dict[str, Any]:
    watch_ms, pings, _ = case
    options: Dict[str, Any] = {}
    if watch_ms != "-":
        options["watch"] = float(watch_ms) / 1000
    if pings != "-":
        options["pings"] = float(pings) if "." in pings else int(pings)
    return options


def check(case: Tuple[str, str, str], outcome: Any) -> None:
    watch_ms, _, expect = case
    if expect == "accepted":
        assert isinstance(outcome, sr.DoctorReport), outcome
    else:
        assert isinstance(outcome, sr.ConfigError), outcome
        named = "watch must be" if watch_ms != "-" else "pings must be"
        assert outcome.message.startswith(named), outcome


@pytest.mark.parametrize("case", CASES, ids=["/".join(c) for c in CASES])
def test_doctor_options(topology: Any, case: Tuple[str, str, str]) -> None:
    options = options_of(case)
    try:
        outcome: Any = sr.doctor_blocking(topology.url, **options)
    except sr.Error as e:
        outcome = e
    check(case, outcome)
    if case[2] == "refused":

        async def run() -> Any:
            try:
                return await sr.doctor(topology.url, **options)
            except sr.Error as e:
                return e

        check(case, asyncio.run(run()))
