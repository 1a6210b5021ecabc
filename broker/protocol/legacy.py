"""Up-conversion of legacy requests and down-conversion of their responses.

A request at a version below its API's ``handler_min`` (the versions Kafka 4.0 dropped and
kio does not generate, see ``apis``) is decoded with its legacy schema and converted to the
``handler_min`` version before any handler sees it; the handler's response at that version
is converted back to the client's. Both directions are the same walk over kio's dataclasses:

* Fields are matched **by name** (the legacy schemas use kio's names), recursively through
  nested structs and arrays of structs.
* A field the target has and the source lacks takes the target's default, which is the
  default Kafka's JSON gives for the versions that lack it (``"default": "-1"``...): e.g.
  Fetch's ``isolation_level`` 0 and ``max_bytes`` 2147483647, OffsetForLeaderEpoch's
  ``current_leader_epoch`` -1, the ACL APIs' pattern type 3 (LITERAL).
* A field the source has and the target lacks is dropped (v1 OffsetCommit's
  ``commit_timestamp``, a response's ``throttle_time`` for v0).
* A few fields need a rule, listed per API in ``_UP`` and ``_DOWN``: Metadata v0's empty topic
  list means every topic (v1: null does); OffsetCommit v0 has no member (v2: ``""``);
  DescribeConfigs v0 answers ``is_default`` where v1 answers ``config_source``.

A field with no value and no default on the target is ``LocalProtocolError``: a legacy schema
that does not fit its target is Sluice's bug, not the peer's.

Pure functions; thread-safe.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Final, Union, get_args, get_origin

from .apis import ApiKey
from .errors import LocalProtocolError

__all__ = ["up_convert", "down_convert"]

#: Kafka's ConfigSource DEFAULT_CONFIG: a v0 DescribeConfigs entry with it is ``is_default``.
_DEFAULT_CONFIG_SOURCE: Final = 5

Rule = Callable[[Any], Any]
"""A field's value on the target, computed from the source struct that holds it."""

#: (api key) → {field name: rule} for fields of the *target* (handler) version.
_UP: Final[Mapping[int, Mapping[str, Rule]]] = {
    ApiKey.METADATA: {"topics": lambda src: src.topics or None},
    ApiKey.OFFSET_COMMIT: {"member_id": lambda src: getattr(src, "member_id", "")},
}
#: (api key) → {field name: rule} for fields of the *client's* (legacy) response version.
_DOWN: Final[Mapping[int, Mapping[str, Rule]]] = {
    ApiKey.DESCRIBE_CONFIGS: {
        "is_default": lambda src: src.config_source == _DEFAULT_CONFIG_SOURCE,
    },
}


def up_convert(api_key: int, body: Any, target: type[Any]) -> Any:
    """The request ``body`` (a legacy version) as an instance of ``target``."""
    return _convert(body, target, _UP.get(api_key, {}))


def down_convert(api_key: int, body: Any, target: type[Any]) -> Any:
    """The response ``body`` (the handler's version) as an instance of ``target``."""
    return _convert(body, target, _DOWN.get(api_key, {}))


@cache
def _struct_type(annotation: Any) -> tuple[type[Any] | None, bool]:
    """``(struct class, is_array)`` of a field annotation: ``X``, ``X | None``,
    ``tuple[X, ...]`` or ``tuple[X, ...] | None`` with X a dataclass; ``(None, False)`` for
    anything else (primitives and arrays of primitives are copied as they are)."""
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        for arg in get_args(annotation):
            if arg is not type(None):
                return _struct_type(arg)
        return None, False
    if origin is tuple:
        args = get_args(annotation)
        if args and isinstance(args[0], type) and dataclasses.is_dataclass(args[0]):
            return args[0], True
        return None, False
    if isinstance(annotation, type) and dataclasses.is_dataclass(annotation):
        return annotation, False
    return None, False


def _has_default(f: dataclasses.Field[Any]) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _convert(source: Any, target: type[Any], rules: Mapping[str, Rule]) -> Any:
    values: dict[str, Any] = {}
    for f in dataclasses.fields(target):
        if f.name in rules:
            value = rules[f.name](source)
        elif not hasattr(source, f.name):
            if not _has_default(f):
                raise LocalProtocolError(
                    f"cannot convert {type(source).__name__} to {target.__name__}: "
                    f"expected a value or a default for {f.name}, found neither"
                )
            continue
        else:
            value = getattr(source, f.name)
        struct, is_array = _struct_type(f.type)  # type: ignore[arg-type]  # a type, hashable
        if struct is not None and value is not None:
            if is_array:
                value = tuple(_convert(item, struct, rules) for item in value)
            else:
                value = _convert(value, struct, rules)
        values[f.name] = value
    return target(**values)
