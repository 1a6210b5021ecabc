"""The nightly load's configuration (``conf/nightly_load.properties``), declared once.

``CONFIG_DEF`` declares every key the load reads — name, type, default, validator and doc —
through ``sluice.common.config_def`` (Kafka's ``ConfigDef``): ``LoadConfig.from_properties``
parses through it, the "did you mean" check compares a misspelt key with its names and the
``kafka.*`` / ``spark.*`` families, and the configuration page of the docs is its Markdown
table (``python -m sluice.cli.config_docs``). A key added here is parsed, checked and
documented at once; nothing lists the keys a second time.

What the declarations cannot say is checked in ``from_properties``, in the order a reader
meets the keys: the typed-value keys only with ``valueFormat=avro|json-schema|protobuf`` (and
``schema.registry.url`` then required; ``ValueOptions.parse`` checks their values as the
source checks its options),
and the ``kafka.*`` keys as librdkafka's — the prefix cut once, here, and Java-only keys
translated or refused exactly as the ``sluice`` source's ``kafka.*`` options are
(``sluice.pipeline.kafka_settings``). Every failure is a ``LoadConfigError`` saying
``"<key>: expected ..., found ..."``.

``LoadConfig`` is immutable; ``CONFIG_DEF`` is built once at import and only read after that,
so both are safe to share between threads.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.common.config_def import POSITIVE, REQUIRED, Check, ConfigDef, Type, Validator
from sluice.common.paths import to_uri
from sluice.pipeline.kafka_settings import translate_java_settings
from sluice.pipeline.load.errors import LoadConfigError
from sluice.pipeline.source.options import (
    OffsetOptionError,
    OffsetSpec,
    Subscribe,
    SubscribePattern,
    ValueOptions,
    parse_starting_offsets,
    parse_subscribe_pattern,
)
from sluice.pipeline.source.split_reader import consumer_settings
from sluice.pipeline.source.value_format import VALUE_FORMATS, ValueFormat
from sluice.pipeline.table.filesystem import UnsupportedTableSchemeError, check_table_scheme
from sluice.pipeline.table.iceberg_catalog import IcebergConfig, IcebergConfigError

__all__ = ["CONFIG_DEF", "TYPED_KEYS", "LoadConfig", "LoadConfigError"]


class _CommaList(Validator):
    """A ``LIST`` with at least one entry; the error quotes what was given."""

    def describe(self) -> str:
        return "a comma list of one or more names"

    def check(self, value: Any, raw: str) -> str | None:
        return None if value else f"expected a comma list, found {raw.strip()!r}"


def _plain_name(table: str) -> str | None:
    if "/" in table or table.startswith(("_", ".")):
        return f"expected a plain directory name, found {table!r}"
    return None


def _value_format(value: str) -> str | None:
    if value.strip().lower() in VALUE_FORMATS:
        return None
    return f"expected {', '.join(VALUE_FORMATS)}, found {value.strip().lower()!r}"


def _table_format(value: str) -> str | None:
    if value.lower() in ("parquet", "iceberg"):
        return None
    return f"expected parquet or iceberg, found {value.lower()!r}"


def _pattern_error(value: str) -> str | None:
    try:
        parse_subscribe_pattern(value)
    except OffsetOptionError as exc:
        return str(exc).removeprefix("option 'subscribePattern': ")
    return None


def _timestamp_error(value: str) -> str | None:
    if value.strip().isdigit():
        return None
    return f"expected milliseconds since the epoch, found {value.strip()!r}"


def _atomic_rename(path: str) -> str | None:
    try:
        check_table_scheme(to_uri(path))
    except UnsupportedTableSchemeError as exc:
        return str(exc)
    return None


CONFIG_DEF = (
    ConfigDef(error=LoadConfigError, what="load config")
    .define(
        "kafka.bootstrap.servers", Type.STRING, REQUIRED,
        doc="The (offline) cluster to read from, host:port[,...]. The executors connect to it "
        "too: on a cluster name the brokers by an address every worker can reach.",
    )
    .define(
        "topics", Type.LIST, None, _CommaList(), default_doc="none: subscribePattern",
        doc="Topics to load, comma-separated (this or subscribePattern). A topic that does "
        "not exist fails the run (allowMissingTopics=true skips it); partitions the table has "
        "never seen start where startingOffsets / startingTimestamp say.",
    )
    .define(
        "subscribePattern", Type.STRING, None,
        Check("a regular expression", lambda v: _pattern_error(v)),
        doc="Instead of topics: every topic whose whole name matches this regular expression "
        "(Python re), evaluated at plan time; the run report lists the topics that matched and "
        "the manifest has a range for each of their partitions.",
    )
    .define(
        "startingOffsets", Type.STRING, None, default_doc="earliest",
        doc="Where partitions the table has never seen start: earliest, latest, or Spark's "
        'JSON {"topic":{"0":23,"1":-2}} (-2 earliest, -1 latest; partitions it does not name '
        "start at earliest). Partitions already loaded resume from the table's offsets.",
    )
    .define(
        "startingTimestamp", Type.STRING, None,
        Check("milliseconds since the epoch", lambda v: _timestamp_error(v)),
        doc="Instead of startingOffsets (it wins, as in Spark): partitions the table has never "
        "seen start at their first record whose timestamp is at or after this (ms since the "
        "epoch); a partition with no record that late starts at its end.",
    )
    .define(
        "warehouse.path", Type.STRING, REQUIRED,
        doc="Where tables live. table.format=parquet: a local path, file:// or hdfs://; "
        "object stores (s3a://, ...) are refused, they have no atomic rename. "
        "table.format=iceberg: also s3://. On a cluster a local path must be one filesystem "
        "shared by the driver and every worker at the same path.",
    )
    .define(
        "table.format", Type.STRING, "parquet", Check("parquet, iceberg", _table_format),
        doc="parquet: the Camus-style directory layout under <warehouse.path>/<table> "
        "(docs/nightly-load.md). iceberg: one Apache Iceberg table per topic, committed "
        "with its offsets (docs/iceberg.md); configured by the iceberg.* keys.",
    )
    .define(
        "table", Type.STRING, "events", Check("a plain directory name", _plain_name),
        doc="The table's directory under warehouse.path: <warehouse.path>/<table>, laid out "
        "load=<N>/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet with load=<N>/_manifest.json.",
    )
    .define(
        "reports.path", Type.STRING, None, default_doc="<warehouse.path>/_reports",
        doc="Where run reports go, as <run id>.json.",
    )
    .define(
        "run.id", Type.STRING, None, default_doc="nightly-<table>-<UTC timestamp>",
        doc="A fixed run id. A rerun under the same id after a crash before publishing "
        "replaces its own staging directory.",
    )
    .define(
        "failOnDataLoss", Type.BOOLEAN, True,
        doc="Offsets no longer in the log (retention ran first, or the topic was recreated): "
        "true fails the run and publishes nothing; false reads what is left and records the "
        "loss in the manifest and the report.",
    )
    .define(
        "minPartitions", Type.INT, None, POSITIVE,
        doc="At least this many Spark splits (ranges are cut proportionally).",
    )
    .define(
        "maxRecordsPerPartition", Type.INT, None, POSITIVE,
        doc="No Spark split larger than this many offsets.",
    )
    .define(
        "rowsPerTask", Type.INT, 100_000, POSITIVE,
        doc="Small ranges are packed into Spark tasks of about this many offsets (as Camus "
        "and Gobblin pack work units), each task writing one file per topic and date; fewer "
        "when needed to give every core of the application work, or to honour minPartitions "
        "and maxRecordsPerPartition.",
    )
    .define(
        "stallTimeoutMs", Type.INT, 300_000, POSITIVE,
        doc="The load's deadline for progress: when no split finishes for this long and a "
        "broker does not answer, the run is cancelled, names the brokers it could not reach "
        "and the splits that were waiting, publishes nothing and exits 3. While a broker "
        "answers, each split is bounded by kafkaConsumer.pollTimeoutMs instead (a long split "
        "is still reading).",
    )
    .define(
        "kafkaConsumer.pollTimeoutMs", Type.INT, 120_000, POSITIVE,
        doc="As Spark's option: how long one split may wait for a record before its task "
        "fails (naming the brokers librdkafka could not connect to, if any).",
    )
    .define(
        "allowMissingTopics", Type.BOOLEAN, False,
        doc="false: a topic of topics that does not exist fails the run before Spark starts "
        "(exit 2, naming the nearest existing topics). true: it is skipped, for topics "
        "created later.",
    )
    .define(
        "spark.master", Type.STRING, None, default_doc="Spark's conventions",
        doc="The Spark master when the job is not started by spark-submit. Unset: "
        "spark-submit --master, spark.master in $SPARK_CONF_DIR/spark-defaults.conf, the "
        "MASTER environment variable, else local[*].",
    )
    .define(
        "valueFormat", Type.STRING, "binary", Check(", ".join(VALUE_FORMATS), _value_format),
        doc="binary: Spark's Kafka columns, the value as bytes. avro, json-schema, protobuf: "
        "each value is Confluent-framed Avro, JSON or Protobuf (the registry's schema id in "
        "its header) decoded into typed columns beside the Kafka ones.",
    )
    .define(
        "schema.registry.url", Type.STRING, None,
        doc="The schema registry (Confluent REST API); required with a typed valueFormat.",
    )
    .define(
        "valueSchemaSubject", Type.STRING, None, default_doc="<topic>-value",
        doc="Typed valueFormat: the subject of the reader schema (the table's columns), the "
        "same for every topic of the table; its schema must be of the format's type.",
    )
    .define(
        "valueSchemaVersion", Type.STRING, None, default_doc="latest",
        doc="Typed valueFormat: the version of valueSchemaSubject to read with; resolved once "
        "per run and pinned by id.",
    )
    .define(
        "valueSchemaId", Type.STRING, None,
        doc="Typed valueFormat: the reader schema by id (instead of subject and version).",
    )
    .define(
        "valueSchemaMessage", Type.STRING, None, default_doc="the schema's first message",
        doc="valueFormat=protobuf: the value's message type, by full name (package.Message); "
        "records of another message go to the error table.",
    )
    .define(
        "valueColumns", Type.STRING, None, default_doc="flatten",
        doc="Typed valueFormat: flatten (the value's fields as top-level columns) or struct "
        "(one value struct column).",
    )
    .define(
        "onDecodeError", Type.STRING, None, default_doc="errorTable",
        doc="Typed valueFormat: errorTable (an undecodable record goes to the run's error "
        "table, load=<N>/_errors/, published with the data) or fail (the run fails naming "
        "topic, partition and offset).",
    )
    .family(
        "kafka.<key>",
        "Any other consumer setting, passed to every consumer of the load as librdkafka's; "
        "Java-client keys carried over from Spark jobs are translated or refused.",
        prefix="kafka.",
    )
    .family(
        "spark.<key>",
        "Any other Spark setting, passed to the SparkSession builder.",
        prefix="spark.",
    )
    .family(
        "iceberg.<key>",
        "table.format=iceberg: the catalog and tables (docs/iceberg.md lists them); refused "
        "with table.format=parquet.",
        prefix="iceberg.",
    )
)  # fmt: skip
"""Every key of ``conf/nightly_load.properties``, declared once (the module doc)."""

TYPED_KEYS = (
    "schema.registry.url",
    "valueSchemaSubject",
    "valueSchemaVersion",
    "valueSchemaId",
    "valueSchemaMessage",
    "valueColumns",
    "onDecodeError",
)
"""The ``sluice`` source's typed-value options a load passes through (with ``valueFormat``)."""


@dataclass(frozen=True)
class LoadConfig:
    """The parsed configuration of one load; each key's meaning is its ``CONFIG_DEF`` doc."""

    bootstrap_servers: str
    topics: tuple[str, ...]
    warehouse: str  # a URI (plain paths are made absolute file:// URIs)
    table: str = "events"
    fail_on_data_loss: bool = True
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    spark_master: str | None = None  # None: Spark's conventions (sluice.pipeline.load.session)
    run_id: str | None = None
    reports: str | None = None  # default <warehouse>/_reports
    # The other kafka.* keys as librdkafka's: prefix cut, Java-only keys translated
    # (_kafka_settings); every consumer of the run gets them through ``consumer``.
    kafka: dict[str, str] = field(default_factory=dict)
    spark: dict[str, str] = field(default_factory=dict)  # other spark.* keys
    # valueFormat=avro|json-schema|protobuf: typed columns; the error path is set per run
    typed: ValueOptions | None = None
    subscribe_pattern: SubscribePattern | None = None  # instead of topics
    starting_offsets: OffsetSpec = "earliest"  # for partitions the table has never seen
    starting_timestamp: int | None = None  # wins over starting_offsets
    rows_per_task: int = 100_000
    stall_timeout_ms: int = 300_000
    poll_timeout_ms: int = 120_000
    allow_missing_topics: bool = False
    iceberg: IcebergConfig | None = None  # table.format=iceberg

    @property
    def value_format(self) -> str:
        return "binary" if self.typed is None else self.typed.value_format.value

    @property
    def strategy(self) -> Subscribe | SubscribePattern:
        """The topics to read as the source's consumer strategy."""
        if self.subscribe_pattern is not None:
            return self.subscribe_pattern
        return Subscribe(list(self.topics))

    @property
    def described_topics(self) -> str:
        """``a, b`` or ``topics matching <pattern>``, for messages."""
        if self.subscribe_pattern is not None:
            return f"topics matching {self.subscribe_pattern.pattern.pattern!r}"
        return ", ".join(self.topics)

    @property
    def described_destination(self) -> str:
        """Where the load lands, for messages: the Parquet table's URI, or the Iceberg tables
        and their warehouse (``sluice.page_views in file:///data/warehouse``)."""
        if self.iceberg is None:
            return self.table_uri
        if self.subscribe_pattern is not None:
            tables = f"the Iceberg tables {self.iceberg.namespace}.<topic>"
        else:
            tables = (
                "the Iceberg table"
                + ("s " if len(self.topics) > 1 else " ")
                + ", ".join(self.iceberg.identifier(t) for t in self.topics)
            )
        return f"{tables} in {self.iceberg.catalog_properties['warehouse']}"

    @property
    def split_timeout_s(self) -> float:
        """How long one split waits for a record before its task fails
        (``kafkaConsumer.pollTimeoutMs``, in seconds)."""
        return self.poll_timeout_ms / 1000

    @property
    def table_uri(self) -> str:
        return posixpath.join(self.warehouse, self.table)

    @property
    def reports_uri(self) -> str:
        return self.reports or posixpath.join(self.warehouse, "_reports")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> LoadConfig:
        """The config of ``props`` (see the module doc). Raises ``LoadConfigError``: a key
        nothing reads names the nearest known one; a bad value says what was expected."""
        CONFIG_DEF.check_known(props)

        def get(key: str) -> Any:
            return CONFIG_DEF.parse_key(props, key)

        topics = get("topics")
        pattern = get("subscribePattern")
        if topics is None and pattern is None:
            raise LoadConfigError("topics: expected a value, found none (or subscribePattern)")
        if topics is not None and pattern is not None:
            raise LoadConfigError("topics, subscribePattern: expected one of them, found both")
        try:
            # streaming=True: "latest" is allowed (the load is a resume, not a batch query);
            # unset is earliest, as for batch.
            starting = parse_starting_offsets(get("startingOffsets") or "earliest", streaming=True)
        except OffsetOptionError as exc:
            raise LoadConfigError(
                str(exc).replace("option 'startingOffsets'", "startingOffsets")
            ) from None
        timestamp = get("startingTimestamp")
        raw_table = props.get("table")
        if raw_table and not raw_table.strip():  # "table= " is refused; only "table=" is blank
            raise LoadConfigError("table: expected a plain directory name, found ''")
        table = get("table")
        typed = _typed(props, get("valueFormat"))
        reports = get("reports.path")
        warehouse = to_uri(get("warehouse.path"))
        iceberg = _iceberg(props, get("table.format").lower(), warehouse)
        return cls(
            iceberg=iceberg,
            typed=typed,
            bootstrap_servers=get("kafka.bootstrap.servers"),
            topics=topics or (),
            subscribe_pattern=parse_subscribe_pattern(pattern) if pattern else None,
            starting_offsets=starting,
            starting_timestamp=int(timestamp) if timestamp is not None else None,
            warehouse=warehouse,
            table=table,
            fail_on_data_loss=get("failOnDataLoss"),
            min_partitions=get("minPartitions"),
            max_records_per_partition=get("maxRecordsPerPartition"),
            spark_master=get("spark.master"),
            rows_per_task=get("rowsPerTask"),
            stall_timeout_ms=get("stallTimeoutMs"),
            poll_timeout_ms=get("kafkaConsumer.pollTimeoutMs"),
            allow_missing_topics=get("allowMissingTopics"),
            run_id=get("run.id"),
            reports=to_uri(reports) if reports else None,
            kafka=_kafka_settings(props),
            spark={
                k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"
            },
        )

    def consumer(self, run_id: str) -> dict[str, Any]:
        """The librdkafka settings of every consumer of run ``run_id`` (the planner's and the
        split writers'; ``split_reader.consumer_settings``): ``kafka.group.id`` if given, else
        ``sluice-load-<run_id>``. ``run_load`` calls it once per run."""
        return consumer_settings(
            {"bootstrap.servers": self.bootstrap_servers, **self.kafka},
            group_id=f"sluice-load-{run_id}",
        )


def _typed(props: Mapping[str, str], value_format: str) -> ValueOptions | None:
    """The options of a typed ``valueFormat`` (``None`` for binary), parsed once, here; the
    run adds its own error table directory (``decodeErrorPath``)."""
    given = {k: v for k in TYPED_KEYS if (v := CONFIG_DEF.parse_key(props, k)) is not None}
    typed = ValueFormat.parse(value_format)  # checked by the declaration already
    if typed is None:
        if given:
            raise LoadConfigError(
                f"{sorted(given)[0]}: expected only with valueFormat="
                f"{'|'.join(f.value for f in ValueFormat)}, found valueFormat=binary"
            )
        return None
    if "schema.registry.url" not in given:
        raise LoadConfigError("schema.registry.url: expected a value, found none")
    try:
        return ValueOptions.parse(
            {"valueFormat": typed.value, "onDecodeError": "errorTable", **given}
        )
    except ValueError as exc:
        raise LoadConfigError(str(exc)) from None


def _iceberg(props: Mapping[str, str], table_format: str, warehouse: str) -> IcebergConfig | None:
    """The ``iceberg.*`` settings of ``table.format=iceberg`` (``None`` for parquet, which
    refuses them and needs a warehouse with an atomic rename; Iceberg commits through its
    catalog, so an object store will do)."""
    if table_format != "iceberg":
        stray = sorted(k for k in props if k.startswith("iceberg."))
        if stray:
            raise LoadConfigError(
                f"{stray[0]}: expected only with table.format=iceberg, found table.format=parquet"
            )
        problem = _atomic_rename(warehouse)
        if problem:
            raise LoadConfigError(f"warehouse.path: {problem}")
        return None
    try:
        return IcebergConfig.from_properties(props, warehouse)
    except IcebergConfigError as exc:
        raise LoadConfigError(str(exc)) from None


def _kafka_settings(props: Mapping[str, str]) -> dict[str, str]:
    """The config's ``kafka.*`` keys but ``kafka.bootstrap.servers`` as librdkafka's, the
    prefix cut (here, once): Java-only keys carried over from Spark jobs translated (a
    ``sasl.jaas.config`` line becomes ``sasl.username`` / ``sasl.password``) or refused with
    what to use instead, exactly as the ``sluice`` source's ``kafka.*`` options are
    (``sluice.pipeline.kafka_settings``)."""
    raw = {
        k[len("kafka.") :].lower(): v
        for k, v in props.items()
        if k.startswith("kafka.") and k != "kafka.bootstrap.servers"
    }
    try:
        return translate_java_settings(raw)
    except ValueError as exc:  # JavaOnlyKafkaOptionError, JaasTranslationError
        raise LoadConfigError(str(exc)) from None
