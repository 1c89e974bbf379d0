"""The error codes and event kinds exist once, in the core: the generated `_tables.py` must equal
the core's lists as the native module reports them at run time, and the exception classes and the
typed event shapes must cover exactly those."""

from __future__ import annotations

import typing

import sentinel_recovery as sr
from sentinel_recovery import _errors, _native, _tables, _types


def test_generated_tables_equal_the_cores_lists() -> None:
    assert list(_tables.ERROR_CODES) == _native.error_codes()
    assert list(_tables.EVENT_KINDS) == _native.event_kinds()
    assert sr.ERROR_CODES is _tables.ERROR_CODES and sr.EVENT_KINDS is _tables.EVENT_KINDS
    # Values are the 1-based positions, as in the C header.
    assert [value for _, value, _ in _tables.ERROR_CODES] == list(range(1, len(_tables.ERROR_CODES) + 1))
    assert dict((name, value) for name, value, _ in _tables.ERROR_CODES)["internal"] == 13
    kinds = {name for name, _, _ in _tables.EVENT_KINDS}
    assert {"failover_started", "sentinel_tilt", "sentinel_service_unknown"} <= kinds


def test_one_named_exception_class_per_code_of_the_table() -> None:
    codes = [name for name, _, _ in _tables.ERROR_CODES]
    assert list(_errors._BY_CODE) == codes, "a code without its class, or a class without its code"
    for code, cls in _errors._BY_CODE.items():
        assert issubclass(cls, sr.Error) and cls.code == code
        assert cls.__name__ == "".join(part.capitalize() for part in code.split("_")) + "Error"
        assert cls.__name__ in sr.__all__ and getattr(sr, cls.__name__) is cls
    assert _errors._make_error("internal", "boom").__class__ is sr.InternalError


def test_a_code_without_a_class_gets_the_base_class_with_its_code() -> None:
    err = _errors._make_error("brand_new", "something new happened")
    assert type(err) is sr.Error and err.code == "brand_new"
    assert str(err) == "brand_new: something new happened"


def test_event_shapes_cover_every_kind_of_the_table() -> None:
    kinds = [name for name, _, _ in _tables.EVENT_KINDS]
    assert sorted(typing.get_args(_types.EventKind)) == sorted(kinds)
    shapes = typing.get_args(_types.Event)
    by_kind = {typing.get_args(typing.get_type_hints(shape)["kind"])[0]: shape for shape in shapes}
    assert sorted(by_kind) == sorted(kinds)
    for kind, shape in by_kind.items():
        hints = typing.get_type_hints(shape)
        assert {"kind", "service", "at"} <= set(hints), kind
        assert hints["service"] is str and hints["at"] is int, kind


def test_topology_shape() -> None:
    assert set(typing.get_type_hints(sr.Topology)) == {"service", "primary", "replicas", "sentinels", "epoch", "healthy"}
    # `announced` only where address_map mapped the address.
    assert sr.SentinelInfo.__required_keys__ == {"host", "port", "up", "tilt", "knows_service"}
    assert sr.SentinelInfo.__optional_keys__ == {"announced"}
    assert sr.Address.__required_keys__ == {"host", "port"}
    assert sr.Address.__optional_keys__ == {"announced"}


def test_every_name_in_all_is_importable() -> None:
    # `from sentinel_recovery import *` fails on a name listed in __all__ but not defined.
    assert [name for name in sr.__all__ if not hasattr(sr, name)] == []
