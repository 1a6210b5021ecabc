"""A batch read planned on the driver, handed to the ``sluice`` source as one option.

Left to itself, the source plans every batch read: it parses the options
(``sluice.pipeline.source.options``), lists the partitions and their log bounds, resolves the
offsets to ranges (``sluice.pipeline.source.ranges``) and, for typed values, asks the registry
for the reader schema. A caller that has done all of this already — the nightly load plans its
run before Spark starts, and must read exactly the ranges its manifest will record — hands the
outcome over as the option ``readPlan`` (``ReadPlan.encode()``), and the source reads those
ranges as they are: no second metadata request, no second resolution, no registry request on
the driver::

    spark.read.format("sluice")
        .option("kafka.bootstrap.servers", "127.0.0.1:9092")
        .option("readPlan", ReadPlan(ranges, fail_on_data_loss=True).encode())
        .load()

The plan replaces the options it decides: beside ``readPlan`` a read takes ``kafka.*`` and the
options of ``ReadOptions`` (``metricsPath``, ...), and none of ``PLANNED_OPTIONS``
(``InvalidReadPlanError`` names the one found). The plan says whether the read has the
``headers`` column (``include_headers``): the nightly load keeps them for lineage, so its plans
say ``true`` in so many words, whatever Spark's default (``false``) for a plain read. The plan
also says which isolation level its ranges were bounded with (``isolation_level``, default
``read_committed``: "latest" ends are last stable offsets, ``sluice.pipeline.source.isolation``)
and the source reads them with that level: a ``kafka.isolation.level`` beside the plan must
agree (``InvalidReadPlanError`` otherwise), since a range that ends at a high watermark read
with ``read_committed`` waits on any transaction still open in it. Batch reads only. The
split reader still checks every range against the log when it fetches it, so a log that lost
offsets between planning and reading is data loss as ever.

JSON, version 1::

    {"version": 1,
     "ranges": [{"topic": "t", "partition": 0, "start": 10, "end": 20}, ...],
     "fail_on_data_loss": true, "min_partitions": 4, "max_records_per_partition": null,
     "include_headers": true,        # absent (an older plan): true, what the load read then
     "isolation_level": "read_committed",  # or "read_uncommitted"; absent (an older plan):
                                           # read_uncommitted, what the source read then
     "avro": null}                   # or {"options": {...AvroOptions.to_json()...},
                                     #     "reader": {"text": "<schema>", "schema_id": 7,
                                     #                "subject": "t-value", "version": 2}}

Immutable and picklable; ``decode`` validates every field (``InvalidReadPlanError`` says what
was expected and what was found).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from sluice.pipeline.source.avro_columns import ReaderSchema
from sluice.pipeline.source.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_KEY,
    ISOLATION_LEVELS,
    READ_UNCOMMITTED,
    InvalidIsolationLevelError,
    parse_isolation_level,
)
from sluice.pipeline.source.options import AvroOptions, CaseInsensitiveOptions
from sluice.pipeline.source.ranges import OffsetRange

__all__ = [
    "PLANNED_OPTIONS",
    "READ_PLAN_OPTION",
    "READ_PLAN_VERSION",
    "InvalidReadPlanError",
    "ReadPlan",
]

READ_PLAN_OPTION = "readPlan"
READ_PLAN_VERSION = 1

PLANNED_OPTIONS = (
    "assign",
    "subscribe",
    "subscribePattern",
    "startingOffsets",
    "endingOffsets",
    "failOnDataLoss",
    "minPartitions",
    "maxRecordsPerPartition",
    "valueFormat",
    "schema.registry.url",
    "valueSchemaSubject",
    "valueSchemaVersion",
    "valueSchemaId",
    "valueColumns",
    "onDecodeError",
    "decodeErrorPath",
    "includeHeaders",
    "startingTimestamp",
    "endingTimestamp",
    "startingOffsetsByTimestamp",
    "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy",
)
"""Options a ``readPlan`` decides; a read may not give them beside it."""


class InvalidReadPlanError(ValueError):
    """A ``readPlan`` option does not decode, or other options contradict it."""


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """The ranges of a batch read and the parsed options that shape it; see the module doc.

    ``avro`` and ``reader_schema`` are both set (typed values) or both ``None`` (binary).
    """

    ranges: tuple[OffsetRange, ...]
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    avro: AvroOptions | None = None
    reader_schema: ReaderSchema | None = None
    # The load's plans keep headers (lineage); its default keeps them for a caller that
    # predates the option. Encoded explicitly in every plan.
    include_headers: bool = True
    # The level the ranges were bounded with and are read with: the load plans with its
    # consumers' default, read_committed (LSO ends), so a plan made without it says that.
    isolation_level: str = DEFAULT_ISOLATION_LEVEL

    def __post_init__(self) -> None:
        for r in self.ranges:
            if not 0 <= r.start <= r.end:
                _fail("ranges", "0 <= start <= end", r.name())
        if len({r.topic_partition for r in self.ranges}) != len(self.ranges):
            _fail("ranges", "one range per partition", [r.name() for r in self.ranges])
        for name, value in (
            ("min_partitions", self.min_partitions),
            ("max_records_per_partition", self.max_records_per_partition),
        ):
            if value is not None and value <= 0:
                _fail(name, "a positive integer or null", value)
        if (self.avro is None) != (self.reader_schema is None):
            _fail("avro", "options and reader schema together", "only one of them")
        if self.avro is not None:
            self.avro.require_error_path()
        if not isinstance(self.include_headers, bool):
            _fail("include_headers", "true or false", self.include_headers)
        if self.isolation_level not in ISOLATION_LEVELS:
            _fail("isolation_level", " or ".join(ISOLATION_LEVELS), repr(self.isolation_level))

    # -- the option ------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        avro = None
        if self.avro is not None and self.reader_schema is not None:
            reader = self.reader_schema
            avro = {
                "options": self.avro.to_json(),
                "reader": {
                    "text": reader.text,
                    "schema_id": reader.schema_id,
                    "subject": reader.subject,
                    "version": reader.version,
                },
            }
        return {
            "version": READ_PLAN_VERSION,
            "ranges": [r.to_json() for r in self.ranges],
            "fail_on_data_loss": self.fail_on_data_loss,
            "min_partitions": self.min_partitions,
            "max_records_per_partition": self.max_records_per_partition,
            "include_headers": self.include_headers,
            "isolation_level": self.isolation_level,
            "avro": avro,
        }

    def encode(self) -> str:
        """The value of the ``readPlan`` option."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    @classmethod
    def decode(cls, text: str) -> ReadPlan:
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidReadPlanError(
                f"{READ_PLAN_OPTION}: expected a JSON object, found undecodable text ({exc})"
            ) from None
        if not isinstance(doc, dict):
            _fail("", "a JSON object", type(doc).__name__)
        if doc.get("version") != READ_PLAN_VERSION:
            _fail("version", READ_PLAN_VERSION, doc.get("version"))
        try:
            ranges = tuple(OffsetRange.from_json(r) for r in doc["ranges"])
            avro = doc["avro"]
            plan = cls(
                ranges=ranges,
                fail_on_data_loss=bool(doc["fail_on_data_loss"]),
                min_partitions=doc["min_partitions"],
                max_records_per_partition=doc["max_records_per_partition"],
                avro=None if avro is None else AvroOptions.from_json(avro["options"]),
                reader_schema=None if avro is None else ReaderSchema(**avro["reader"]),
                include_headers=doc.get("include_headers", True),
                isolation_level=doc.get("isolation_level", READ_UNCOMMITTED),
            )
        except (KeyError, TypeError, ValueError) as exc:
            if isinstance(exc, InvalidReadPlanError):
                raise
            raise InvalidReadPlanError(
                f"{READ_PLAN_OPTION}: expected a version {READ_PLAN_VERSION} plan, found "
                f"{type(exc).__name__}: {exc}"
            ) from None
        return plan

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> ReadPlan | None:
        """The plan of a read's options (any key case); ``None`` when there is none.

        Raises ``InvalidReadPlanError`` when an option of ``PLANNED_OPTIONS`` is given too, or a
        ``kafka.isolation.level`` other than the plan's.
        """
        opts = CaseInsensitiveOptions(options)
        if READ_PLAN_OPTION not in opts:
            return None
        clashing = [k for k in PLANNED_OPTIONS if k in opts]
        if clashing:
            raise InvalidReadPlanError(
                f"{READ_PLAN_OPTION}: expected no option the plan decides beside it, found "
                f"{', '.join(clashing)}"
            )
        plan = cls.decode(opts[READ_PLAN_OPTION])
        given = opts.get("kafka." + ISOLATION_LEVEL_KEY)
        if given is not None:
            try:
                level = parse_isolation_level(given)
            except InvalidIsolationLevelError as exc:
                raise InvalidReadPlanError(str(exc)) from None
            if level != plan.isolation_level:
                raise InvalidReadPlanError(
                    f"option 'kafka.{ISOLATION_LEVEL_KEY}': expected the plan's "
                    f"{plan.isolation_level} (its ranges were bounded with it) or none, found "
                    f"{level}"
                )
        return plan


def _fail(field: str, expected: object, found: object) -> NoReturn:
    where = f"{READ_PLAN_OPTION}.{field}" if field else READ_PLAN_OPTION
    raise InvalidReadPlanError(f"{where}: expected {expected}, found {found}")
