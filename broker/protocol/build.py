"""Build a versioned kio message from plain values, once for every version of an API.

kio generates one dataclass per message *version*, each with only the fields that version
has, nested entity classes of its own, ``timedelta`` fields for Kafka's ``*_ms`` durations
and an ``ErrorCode`` enum for error codes. A handler describes its response once as nested
dicts and lists, and :func:`build` shapes it for the version the client asked for:

* keys the version does not have are dropped (a v1 Metadata response has no cluster id);
* fields the dicts leave out take the class defaults;
* a list of dicts under a field typed ``tuple[Entity, ...]`` becomes entity instances;
* ints become ``timedelta`` (milliseconds), ``datetime`` (epoch milliseconds, -1 → None) or
  ``ErrorCode`` where the field wants one.

A required field that is missing is our bug: :class:`LocalProtocolError`. Pure; thread-safe.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

from sluice.broker.protocol.errors import LocalProtocolError

T = TypeVar("T")

# Per field: (name, converter or None, has default)
_Plan = tuple[tuple[str, Any, bool], ...]


@functools.cache
def _plan(cls: type[Any]) -> _Plan:
    hints = typing.get_type_hints(cls)
    plan = []
    for f in dataclasses.fields(cls):
        has_default = (
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        )
        plan.append((f.name, _converter(hints[f.name]), has_default))
    return tuple(plan)


def _converter(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _converter(inner[0]) if len(inner) == 1 else None
    if origin is tuple:
        args = typing.get_args(tp)
        if args and dataclasses.is_dataclass(args[0]):
            entity = args[0]
            return ("entities", entity)
        return ("tuple", None)
    if dataclasses.is_dataclass(tp):
        return ("entity", tp)
    if isinstance(tp, type):
        if issubclass(tp, datetime.timedelta):
            return ("timedelta", None)
        if issubclass(tp, datetime.datetime):
            return ("datetime", None)
        if issubclass(tp, ErrorCode):
            return ("error", None)
    return None


def _convert(conv: Any, value: Any) -> Any:
    if conv is None or value is None:
        return value
    kind, entity = conv
    if kind == "entities":
        return tuple(v if isinstance(v, entity) else build(entity, v) for v in value)
    if kind == "entity":
        return value if isinstance(value, entity) else build(entity, value)
    if kind == "tuple":
        return tuple(value)
    if kind == "timedelta":
        return (
            value
            if isinstance(value, datetime.timedelta)
            else datetime.timedelta(milliseconds=int(value))
        )
    if kind == "datetime":
        if isinstance(value, datetime.datetime):
            return value
        # Kafka's -1 means "no timestamp": kio models it as None.
        if int(value) < 0:
            return None
        return datetime.datetime.fromtimestamp(int(value) / 1000, tz=datetime.UTC)
    if kind == "error":
        return value if isinstance(value, ErrorCode) else ErrorCode(int(value))
    return value


def build(cls: type[T], values: Mapping[str, Any]) -> T:
    """An instance of ``cls`` from ``values``, shaped for its version (see module doc)."""
    kwargs = {}
    for name, conv, has_default in _plan(cls):  # type: ignore[arg-type]
        if name in values:
            kwargs[name] = _convert(conv, values[name])
        elif not has_default:
            raise LocalProtocolError(
                f"{cls.__module__}.{cls.__qualname__}: expected a value for {name!r}, found none"
            )
    return cls(**kwargs)


def ms(value: datetime.timedelta | int) -> int:
    """A kio duration field (a ``timedelta``) in whole milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)
