"""The shared argument text cases (tests/cases/arguments.tsv; the policy lives in the core's
``arguments`` module): each number as an ``int`` or ``float`` argument of ECHO, and what the
server echoes, or ConfigError naming the argument for NaN. Python has no 32-bit float: those
cases are skipped."""

from __future__ import annotations

from typing import Any, List, Tuple

import pytest

import sentinel_recovery as sr
from conftest import case_rows

def load_cases() -> List[Tuple[str, str, str]]:
    cases = [(kind, value, text) for kind, value, text in case_rows("arguments.tsv", 3, 19)]
    for kind, value, _ in cases:
        assert kind in ("int", "float", "float32"), f"{value}: kind {kind!r}"
    return cases


CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[f"{k}:{v}" for k, v, _ in CASES])
def test_argument_text(topology: Any, case: Tuple[str, str, str]) -> None:
    kind, value, text = case
    if kind == "float32":
        pytest.skip("Python has no 32-bit float to give")
    number: Any = int(value) if kind == "int" else float(value)
    with sr.BlockingClient.connect(topology.url) as client:
        if text == "refused":
            with pytest.raises(sr.ConfigError) as raised:
                client.execute("ECHO", number)
            assert raised.value.message == "argument 1 is NaN"
        else:
            assert client.execute("ECHO", number) == text.encode()
