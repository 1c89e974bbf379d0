"""How arguments are encoded, the policy shared by every binding: NaN and lone surrogates are
refused with ConfigError naming the argument; +/-inf as `inf` / `-inf`; integers in decimal; other
floats as their shortest round-trip text (JavaScript's layout, as the Node binding sends natively);
and sizes Redis would refuse are refused before anything is sent."""

from __future__ import annotations

import math

import pytest

import sentinel_recovery as sr
from conftest import Topology

# (argument, what the server receives): the same table as the Node and .NET suites.
CASES = [
    (2.0, b"2"),
    (1.5, b"1.5"),
    (0.1, b"0.1"),
    (1 / 3, b"0.3333333333333333"),
    (-0.0, b"-0"),
    (1e21, b"1e+21"),
    (123456789012345680000.0, b"123456789012345680000"),
    (1e-7, b"1e-7"),
    (0.000001, b"0.000001"),
    (-2.5e-300, b"-2.5e-300"),
    (5e-324, b"5e-324"),
    (1.7976931348623157e308, b"1.7976931348623157e+308"),
    (math.inf, b"inf"),
    (-math.inf, b"-inf"),
    (-7, b"-7"),
    (2**63 - 1, b"9223372036854775807"),
    (2**64 - 1, b"18446744073709551615"),
    (-(2**200), str(-(2**200)).encode()),
    ("\U0001F600 pair", "\U0001F600 pair".encode()),
]


def test_numbers_and_strings_are_sent_by_the_shared_policy(topology: Topology) -> None:
    with sr.BlockingClient.connect(topology.url) as client:
        for arg, sent in CASES:
            assert client.execute("ECHO", arg) == sent, (arg, sent)
        # Infinity as Redis writes it: a score that reads back as infinity.
        client.execute("DEL", "py:args:z")
        client.execute("ZADD", "py:args:z", math.inf, "m")
        assert client.execute("ZSCORE", "py:args:z", "m") in (math.inf, b"inf")


async def test_nan_and_lone_surrogates_are_refused_before_sending(topology: Topology) -> None:
    async with sr.Client.connect(topology.url) as client:
        await client.execute("SET", "py:args:k", "before")
        with pytest.raises(sr.ConfigError) as info:
            await client.execute("SET", "py:args:k", math.nan)
        assert info.value.message == "argument 2 is NaN"
        assert info.value.code == "config"
        with pytest.raises(sr.ConfigError) as info:
            await client.execute("SET", "py:args:\ud800", "v")
        assert info.value.message == "argument 1 is not valid Unicode: lone surrogate"
        with pytest.raises(sr.ConfigError) as info:
            await client.execute("SET", "py:args:k", "a\udc00b")
        assert info.value.message == "argument 2 is not valid Unicode: lone surrogate"
        # Neither was sent, nor its U+FFFD-replaced form.
        assert await client.execute("GET", "py:args:k") == b"before"
        assert await client.execute("EXISTS", "py:args:\ufffd") == 0
    with sr.BlockingClient.connect(topology.url) as blocking:
        with pytest.raises(sr.ConfigError, match="argument 3 is NaN"):
            blocking.execute("HSET", "py:args:h", "f", float("nan"))
        with pytest.raises(sr.ConfigError, match="argument 0 is not valid Unicode"):
            blocking.execute("\udfff")


async def test_an_argument_over_512_mib_is_refused_before_sending(topology: Topology) -> None:
    # bytes(n) is calloc'd: no page of it is touched, and the async path borrows it (no copy)
    # until the core has checked the sizes.
    big = bytes(512 * 1024 * 1024 + 1)
    async with sr.Client.connect(topology.url) as client:
        with pytest.raises(sr.ConfigError) as info:
            await client.execute("SET", "py:args:big", big)
        assert "argument 2 is 536870913 bytes" in info.value.message, info.value.message
        assert "nothing was sent" in info.value.message
        # The connection is intact: nothing half-sent, the next command works at once.
        assert await client.execute("PING") in (b"PONG", "PONG")
        assert await client.execute("EXISTS", "py:args:big") == 0
