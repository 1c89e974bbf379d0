"""The shared per-call timeout cases (tests/cases/timeouts.tsv; the rule lives in the core's
``deadline`` module): each value, in seconds, as a call's own ``timeout`` of the asyncio and the
blocking client, for a command and for a pipeline. answers: the call answers; accepted: it answers
or times out (a deadline too short for a busy machine); refused: ConfigError before anything is
sent, its message starting "timeout must be"."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, List, Tuple

import pytest

import sentinel_recovery as sr
from conftest import case_rows

Case = Tuple[float, str, str]


def load_cases() -> List[Case]:
    cases = [(float(value_ms), expect, why) for value_ms, expect, why in case_rows("timeouts.tsv", 3, 8)]
    for value_ms, expect, _ in cases:
        assert expect in ("answers", "accepted", "refused"), f"{value_ms}: expect {expect!r}"
    return cases


CASES = load_cases()
IDS = [str(c[0]) for c in CASES]


def check(case: Case, outcome: Any) -> None:
    _, expect, why = case
    if expect == "answers" or (expect == "accepted" and not isinstance(outcome, sr.TimeoutError)):
        assert outcome is None, f"{why}: {outcome!r}"
    elif expect == "refused":
        assert isinstance(outcome, sr.ConfigError), f"{why}: {outcome!r}"
        assert outcome.message.startswith("timeout must be"), f"{why}: {outcome}"


def outcome_of(call: Callable[[], Any]) -> Any:
    try:
        result = call()
    except sr.Error as e:
        return e
    return result[0] if isinstance(result, list) else result


async def outcome_of_async(call: Callable[[], Awaitable[Any]]) -> Any:
    try:
        result = await call()
    except sr.Error as e:
        return e
    return result[0] if isinstance(result, list) else result


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_blocking_client(topology: Any, case: Case) -> None:
    seconds = case[0] / 1000
    with sr.BlockingClient.connect(topology.url) as client:
        check(case, outcome_of(lambda: client.execute("GET", "timeout-case:absent", timeout=seconds)))
        check(case, outcome_of(lambda: client.pipeline([["GET", "timeout-case:absent"]], timeout=seconds)))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_asyncio_client(topology: Any, case: Case) -> None:
    seconds = case[0] / 1000

    async def run() -> None:
        async with sr.Client.connect(topology.url) as client:
            check(case, await outcome_of_async(lambda: client.execute("GET", "timeout-case:absent", timeout=seconds)))
            check(case, await outcome_of_async(lambda: client.pipeline([["GET", "timeout-case:absent"]], timeout=seconds)))

    asyncio.run(run())
