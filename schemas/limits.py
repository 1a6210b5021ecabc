"""How much a request may ask of the registry: body size, nesting, schema size, subject names.

The keys are declared once, in :data:`CONFIG_DEF` (the registry's "request limits" in
``docs/configuration.md`` are generated from it). Over a limit: the body size answers 413
(``error_code`` 413), the request depth 400 (400), the schema size 422 (42209), the schema
depth 422 (42201), the subject length 422 (42208).

The first two are Confluent's (its Jetty ``SizeLimitHandler``; Confluent leaves it off by
default, Sluice turns it on). The rest are Sluice's own: Confluent bounds nesting through
Jackson's fixed ``StreamReadConstraints`` (1,000 levels) and has no key for them.

* Body size counts the bytes of the request body as sent (``Content-Length`` or the sum of
  the chunks); it is enforced while the body is read (:mod:`sluice.schemas.request_body`).
* Depths count the arrays and objects open at once
  (:func:`~sluice.schemas.json_text.nesting_depth`). A record nested in a field of a record
  adds 3 levels (``fields`` array, field object, the nested record's object; 4 with a union),
  so the default schema depth allows about 40 nested records — far more than schemas in use —
  while the Avro
  parser and the compatibility checker, which recurse on the schema, stay far from Python's
  recursion limit. Depths above :data:`MAX_SAFE_DEPTH` are refused as configuration for that
  reason.
* Schema size is the UTF-8 length of the ``schema`` string (Confluent Cloud's limit is 1 MB).
* Subject names: Confluent refuses control characters when registering or configuring a
  subject (42208); Sluice does too, and bounds the length (a Kafka topic name is at most 249
  characters; ``TopicRecordNameStrategy`` subjects add a record's full name).

Immutable; thread-safe.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common import options
from sluice.common.config_def import POSITIVE, Check, ConfigDef, Type
from sluice.schemas.errors import InvalidSchemaError, InvalidSubjectError, SchemaTooLargeError
from sluice.schemas.json_text import nesting_depth

BODY_LIMIT_ENABLED_KEY = "size.limit.filter.enabled"
MAX_BODY_SIZE_KEY = "size.limit.filter.max.request.body.size"
MAX_REQUEST_DEPTH_KEY = "schema.registry.max.request.depth"
MAX_SCHEMA_SIZE_KEY = "schema.registry.max.schema.size"
MAX_SCHEMA_DEPTH_KEY = "schema.registry.max.schema.depth"
MAX_SUBJECT_LENGTH_KEY = "schema.registry.max.subject.length"

# Deepest JSON the registry agrees to handle at all. The Avro parser, ``to_json`` and the
# compatibility checker recurse about 3 Python frames per JSON level for nested arrays or maps
# (fewer for records): measured in a fresh thread under the default recursion limit of 1,000,
# 329 nested arrays parse, normalize and check, 330 do not. 256 leaves the server's own frames
# (event loop, thread pool, handlers) a margin of some 200.
MAX_SAFE_DEPTH = 256


def _check_depth(depth: int) -> str | None:
    if 1 <= depth <= MAX_SAFE_DEPTH:
        return None
    return (
        f"expected 1 to {MAX_SAFE_DEPTH} (deeper JSON would exhaust Python's recursion limit), "
        f"found {depth}"
    )


_DEPTH = Check(f"[1,...,{MAX_SAFE_DEPTH}]", _check_depth)

CONFIG_DEF = (
    ConfigDef(what="registry configuration")
    .define(
        BODY_LIMIT_ENABLED_KEY, Type.BOOLEAN, True,
        doc="`false`: no request-body size limit (Confluent's key; Confluent's default is off).",
    )
    .define(
        MAX_BODY_SIZE_KEY, Type.INT, 1_048_576, POSITIVE,
        doc="Bytes of a request body; over it: 413, before the body is buffered.",
    )
    .define(
        MAX_REQUEST_DEPTH_KEY, Type.INT, 64, _DEPTH,
        doc="JSON nesting of a request body; over it: 400.",
    )
    .define(
        MAX_SCHEMA_SIZE_KEY, Type.INT, 1_048_576, POSITIVE,
        doc="UTF-8 bytes of a schema; over it: 422, error_code 42209.",
    )
    .define(
        MAX_SCHEMA_DEPTH_KEY, Type.INT, 128, _DEPTH,
        doc="JSON nesting of a schema (a nested record counts 3); over it: 422, 42201.",
    )
    .define(
        MAX_SUBJECT_LENGTH_KEY, Type.INT, 1024, POSITIVE,
        doc="Characters of a subject name; over it: 422, error_code 42208.",
    )
)  # fmt: skip


@dataclass(frozen=True)
class RegistryLimits:
    """Request limits; ``max_body_size`` is ``None`` when the size filter is disabled."""

    max_body_size: int | None = 1_048_576
    max_request_depth: int = 64
    max_schema_size: int = 1_048_576
    max_schema_depth: int = 128
    max_subject_length: int = 1024

    def __post_init__(self) -> None:
        for key, depth in (
            (MAX_REQUEST_DEPTH_KEY, self.max_request_depth),
            (MAX_SCHEMA_DEPTH_KEY, self.max_schema_depth),
        ):
            problem = _check_depth(depth)
            if problem is not None:
                raise options.InvalidOptionError(f"{key}: {problem}")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RegistryLimits:
        """Build from ``.properties`` keys; raise :class:`~sluice.common.options.InvalidOptionError`
        (a ``ValueError``) on a bad value."""
        values = CONFIG_DEF.parse(props)
        return cls(
            max_body_size=values[MAX_BODY_SIZE_KEY] if values[BODY_LIMIT_ENABLED_KEY] else None,
            max_request_depth=values[MAX_REQUEST_DEPTH_KEY],
            max_schema_size=values[MAX_SCHEMA_SIZE_KEY],
            max_schema_depth=values[MAX_SCHEMA_DEPTH_KEY],
            max_subject_length=values[MAX_SUBJECT_LENGTH_KEY],
        )

    def check_schema(self, text: str) -> None:
        """Raise 42209 if ``text`` is too long, 42201 if it nests too deeply; before parsing."""
        # UTF-8 takes at most 4 bytes a character: skip the encoding when it cannot matter.
        if len(text) * 4 > self.max_schema_size:
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > self.max_schema_size:
                raise SchemaTooLargeError(
                    f"Register operation failed because schema is too large: {size} bytes, "
                    f"more than {MAX_SCHEMA_SIZE_KEY}={self.max_schema_size}"
                )
        if nesting_depth(text, stop_above=self.max_schema_depth) > self.max_schema_depth:
            raise InvalidSchemaError(
                f"Invalid schema: nested more than {self.max_schema_depth} levels deep "
                f"(the limit {MAX_SCHEMA_DEPTH_KEY}; a nested record counts 3 levels)"
            )

    def check_subject(self, subject: str) -> None:
        """Raise 42208 for a subject that may not be registered or configured."""
        if len(subject) > self.max_subject_length:
            raise InvalidSubjectError(
                f"The specified subject is not valid: {len(subject)} characters long, more than "
                f"{MAX_SUBJECT_LENGTH_KEY}={self.max_subject_length}"
            )
        if any(unicodedata.category(c) == "Cc" for c in subject):
            raise InvalidSubjectError(
                f"The specified subject {subject!r} is not valid: it contains control characters"
            )
