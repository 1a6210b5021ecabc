"""The dispatch table: which Kafka APIs Sluice speaks, at which versions, with which schemas.

For every API: its key and name, the versions Sluice *implements* (decodes and answers), the
versions it *advertises* in ApiVersions (the same ranges: every version Kafka 3.x accepts for
the APIs Sluice serves, up to what the handlers do), and the lowest version its handler sees
(``handler_min``). A request below ``handler_min`` is up-converted by the codec to that
version and its response down-converted to the client's (``legacy``), so handlers never meet
the versions Kafka 4.0 dropped (KIP-896). Produce v0–2 and Fetch v0–3 carry message sets of
magic 0/1 instead of record batches: ``produce_codec`` up-converts the records and
``fetch_response`` down-converts them (``sluice.broker.log.legacy_records``).

Message schemas are kio's generated dataclasses (``kio.schema.<api>.v<N>.request|response``),
loaded on first use and cached. kio follows Kafka 4.0, which dropped versions Kafka 2.x and 3.x
still accept; those are written in kio's shape in modules of their own (``list_offsets_v0``,
``fetch_v0_3``, ``offset_commit_v0_1``...; one per API, one class per version, suffixed
``V<n>``) and listed in ``_LEGACY``. Flexibility (compact strings, tagged fields,
header v2/v1) comes from the schemas' ``__flexible__`` flag, i.e. from Kafka's
``flexibleVersions``.

**One release's level.** Clients infer the broker's Kafka release from the highest versions
it advertises (kafka-python's ``infer_broker_version_from_api_versions``: DescribeAcls v3
means 3.3, ListOffsets v7 3.0, Produce v8 2.4, ...) and, given an ``api_version`` of their own
that is older, then send *that* release's versions of every API instead of negotiating. So
no API is advertised above the level of the release a client would infer where a newer
version would make it believe in a release whose other APIs Sluice does not speak;
``test_apis`` checks what kafka-python infers. That release is Kafka 3.0, reached by
ListOffsets v7 alone (KIP-734's MAX_TIMESTAMP, which librdkafka's admin ListOffsets needs);
every API kafka-python's inference reads is otherwise at or below 2.8's level (Produce v9,
Fetch v12, the ACL APIs v2). What a 3.0 changes in kafka-python 3.0: without an
``api_version`` it still negotiates each request from the advertised ranges, and its
consumer's default ``session.timeout.ms`` is 45 s (KIP-735, Kafka 3.0's) instead of 10 s.
Pinned to a release at or below the inferred one (kafka-python's own integration suite pins
2.4.0), it sends that release's table unnegotiated; so every version in kafka-python's 2.4
table is served (FindCoordinator v3, JoinGroup v6 and the other flexible group versions,
CreateTopics v5), and so are the group and ACL versions of its 2.5-2.8 tables: OffsetFetch
v7 (KIP-447's ``require_stable``), JoinGroup v7 and SyncGroup v5 (the protocol type and
name, KIP-559), the flexible ACL APIs v2. While Sluice looked like a 2.4, a client pinned to
2.4.0 negotiated (kafka-python orders (2, 4, 0) above (2, 4)). Fetch v12, 2.7's (flexible,
with KIP-320's diverging epochs), and 2.8's Produce v9 (v8, flexible), CreateTopics v7 and
DeleteTopics v6 (topic ids, KIP-516) are served too, so a client pinned to 2.4-2.8 sends
nothing Sluice lacks (``test_apis`` checks kafka-python's tables). OffsetForLeaderEpoch v4,
2.8's, only makes v3 flexible, and CreateTopics v6 and DeleteTopics v5, 2.7's, only add a
quota error: all three are served.

Ranges follow ``shared/protocol.md`` for the data and group APIs; the admin APIs (configs,
partitions, records, groups, log dirs, the cluster) go up to the versions Kafka 3.x answers
that kio has, which include their flexible versions.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Any, Final

from kio.index import UnknownAPIKey, UnknownEntity, load_payload_module
from kio.static.constants import EntityType

from .alter_replica_log_dirs_v0 import AlterReplicaLogDirsRequestV0, AlterReplicaLogDirsResponseV0
from .create_acls_v0 import CreateAclsRequestV0, CreateAclsResponseV0
from .create_topics_v0_1 import (
    CreateTopicsRequestV0,
    CreateTopicsRequestV1,
    CreateTopicsResponseV0,
    CreateTopicsResponseV1,
)
from .delete_acls_v0 import DeleteAclsRequestV0, DeleteAclsResponseV0
from .delete_topics_v0 import DeleteTopicsRequestV0, DeleteTopicsResponseV0
from .describe_acls_v0 import DescribeAclsRequestV0, DescribeAclsResponseV0
from .describe_configs_v0 import DescribeConfigsRequestV0, DescribeConfigsResponseV0
from .describe_log_dirs_v0 import DescribeLogDirsRequestV0, DescribeLogDirsResponseV0
from .fetch_v0_3 import (
    FetchRequestV0,
    FetchRequestV1,
    FetchRequestV2,
    FetchRequestV3,
    FetchResponseV0,
    FetchResponseV1,
    FetchResponseV2,
    FetchResponseV3,
)
from .list_offsets_v0 import ListOffsetsRequest, ListOffsetsResponse
from .offset_commit_v0_1 import (
    OffsetCommitRequestV0,
    OffsetCommitRequestV1,
    OffsetCommitResponseV0,
    OffsetCommitResponseV1,
)
from .offset_fetch_v0 import OffsetFetchRequestV0, OffsetFetchResponseV0
from .offset_for_leader_epoch_v0_1 import (
    OffsetForLeaderEpochRequestV0,
    OffsetForLeaderEpochRequestV1,
    OffsetForLeaderEpochResponseV0,
    OffsetForLeaderEpochResponseV1,
)
from .produce_v0_2 import (
    ProduceRequestV0,
    ProduceRequestV1,
    ProduceRequestV2,
    ProduceResponseV0,
    ProduceResponseV1,
    ProduceResponseV2,
)
from .write_txn_markers_v0 import WriteTxnMarkersRequestV0, WriteTxnMarkersResponseV0

__all__ = [
    "ApiKey",
    "ApiSpec",
    "APIS",
    "spec_for",
    "request_type",
    "response_type",
    "first_flexible_version",
    "request_header_version",
    "response_header_version",
    "supported_api_versions",
]


class ApiKey(enum.IntEnum):
    """Kafka API keys Sluice uses (Kafka's ``ApiKeys.java``)."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: its implemented and advertised version ranges (inclusive)."""

    key: ApiKey
    name: str
    min_version: int
    max_version: int
    advertised_min: int
    advertised_max: int
    handler_min: int = -1  # the lowest version the handler sees; -1: min_version

    def __post_init__(self) -> None:
        if not (self.advertised_min <= self.min_version <= self.max_version <= self.advertised_max):
            raise ValueError(f"{self.name}: implemented range must lie in the advertised range")
        if self.handler_min == -1:
            object.__setattr__(self, "handler_min", self.min_version)
        if not self.min_version <= self.handler_min <= self.max_version:
            raise ValueError(f"{self.name}: handler_min must lie in the implemented range")

    def implements(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    @property
    def versions(self) -> range:
        """The implemented versions."""
        return range(self.min_version, self.max_version + 1)


def _spec(key: ApiKey, name: str, lo: int, hi: int, handler_min: int | None = None) -> ApiSpec:
    return ApiSpec(key, name, lo, hi, lo, hi, lo if handler_min is None else handler_min)


APIS: Final[Mapping[int, ApiSpec]] = MappingProxyType(
    {
        spec.key: spec
        for spec in (
            # v0-2 carry magic 0/1 message sets, up-converted by produce_codec.
            # v9 is v8, flexible (Kafka 2.8's); both by hand in produce_codec.
            _spec(ApiKey.PRODUCE, "Produce", 0, 9),
            # v0-3 get magic 0/1 message sets, down-converted by fetch_response; v12 is the
            # first flexible one, with KIP-320's diverging epochs (Kafka 2.7's).
            _spec(ApiKey.FETCH, "Fetch", 0, 12, handler_min=4),
            # v0 (old-style offset lists): the handler answers it itself. v7's MAX_TIMESTAMP
            # (KIP-734) is Kafka 3.0's level: kafka-python then infers a 3.0 (see "One
            # release's level" above for why that is safe).
            _spec(ApiKey.LIST_OFFSETS, "ListOffsets", 0, 8),
            # v0: an empty topic list means every topic (v1+: null does).
            # v10+ carries topic ids and v12 asks by them: KIP-848 and share consumers need both.
            _spec(ApiKey.METADATA, "Metadata", 0, 12, handler_min=1),
            # Kafka 2.4's level, the table kafka-python pinned to 2.4 sends unnegotiated (see
            # "One release's level"): the flexible OffsetFetch v6, FindCoordinator v3,
            # JoinGroup v6, Heartbeat v4, LeaveGroup v4, SyncGroup v4, DeleteTopics v4 carry
            # the fields of the version before; CreateTopics v5 adds the created topic's counts
            # and configs to the answer.
            # v9: the consumer group protocol's members commit with their epoch (KIP-848).
            _spec(ApiKey.OFFSET_COMMIT, "OffsetCommit", 0, 9, handler_min=2),
            # Kafka 2.5's group versions, which kafka-python pinned to 2.5-2.8 sends: OffsetFetch
            # v7 adds require_stable (KIP-447: UNSTABLE_OFFSET_COMMIT for a partition a
            # transaction holds an offset of), JoinGroup v7 answers the protocol type and
            # SyncGroup v5 sends and answers the type and name (KIP-559).
            _spec(ApiKey.OFFSET_FETCH, "OffsetFetch", 0, 7, handler_min=1),
            _spec(ApiKey.FIND_COORDINATOR, "FindCoordinator", 0, 3),
            _spec(ApiKey.JOIN_GROUP, "JoinGroup", 0, 7),
            _spec(ApiKey.HEARTBEAT, "Heartbeat", 0, 4),
            _spec(ApiKey.LEAVE_GROUP, "LeaveGroup", 0, 4),
            _spec(ApiKey.SYNC_GROUP, "SyncGroup", 0, 5),
            # v3+: authorized operations; v4: static members' instance ids; v5 flexible; v6:
            # GROUP_ID_NOT_FOUND (KIP-1043).
            _spec(ApiKey.DESCRIBE_GROUPS, "DescribeGroups", 0, 6),
            # v3 flexible; v4: states filter (KIP-518); v5: types filter (KIP-848).
            _spec(ApiKey.LIST_GROUPS, "ListGroups", 0, 5),
            _spec(ApiKey.API_VERSIONS, "ApiVersions", 0, 3),
            # CreateTopics v6 and DeleteTopics v5 (Kafka 2.7's) may answer KIP-599's
            # THROTTLING_QUOTA_EXCEEDED, which Sluice (no controller mutation quota) never does;
            # DeleteTopics v5 adds an error message, null as Kafka's ZooKeeper mode answers.
            # CreateTopics v7 answers the created topic's id and DeleteTopics v6 deletes by
            # name or id (KIP-516): Kafka 2.8's, which kafka-python pinned to 2.8 sends.
            _spec(ApiKey.CREATE_TOPICS, "CreateTopics", 0, 7, handler_min=2),
            _spec(ApiKey.DELETE_TOPICS, "DeleteTopics", 0, 6, handler_min=1),
            _spec(ApiKey.INIT_PRODUCER_ID, "InitProducerId", 0, 4),
            # Transactions (KIP-98). AddPartitionsToTxn v4+ is broker-to-broker (KIP-890).
            _spec(ApiKey.ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn", 0, 3),
            _spec(ApiKey.ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn", 0, 3),
            _spec(ApiKey.END_TXN, "EndTxn", 0, 3),
            _spec(ApiKey.WRITE_TXN_MARKERS, "WriteTxnMarkers", 0, 1, handler_min=1),
            _spec(ApiKey.TXN_OFFSET_COMMIT, "TxnOffsetCommit", 0, 3),
            # Followers truncate with it (KIP-101); v3 adds replica_id, v4 (Kafka 2.8's, which
            # kafka-python pinned to 2.8 sends) only makes it flexible.
            _spec(ApiKey.OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch", 0, 4, handler_min=2),
            # Administration.
            _spec(ApiKey.DELETE_RECORDS, "DeleteRecords", 0, 2),
            _spec(ApiKey.DESCRIBE_CONFIGS, "DescribeConfigs", 0, 4, handler_min=1),
            _spec(ApiKey.ALTER_CONFIGS, "AlterConfigs", 0, 2),
            _spec(ApiKey.DESCRIBE_LOG_DIRS, "DescribeLogDirs", 0, 4, handler_min=1),
            _spec(ApiKey.CREATE_PARTITIONS, "CreatePartitions", 0, 3),
            _spec(ApiKey.DELETE_GROUPS, "DeleteGroups", 0, 2),
            _spec(ApiKey.INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs", 0, 1),
            _spec(ApiKey.OFFSET_DELETE, "OffsetDelete", 0, 0),
            _spec(ApiKey.DESCRIBE_CLUSTER, "DescribeCluster", 0, 1),
            # The controller's partition administration (KIP-460, KIP-455).
            # AlterPartitionReassignments v1 is KIP-860's.
            _spec(ApiKey.ALTER_REPLICA_LOG_DIRS, "AlterReplicaLogDirs", 0, 2, handler_min=1),
            _spec(ApiKey.ELECT_LEADERS, "ElectLeaders", 0, 2),
            _spec(ApiKey.ALTER_PARTITION_REASSIGNMENTS, "AlterPartitionReassignments", 0, 1),
            _spec(ApiKey.LIST_PARTITION_REASSIGNMENTS, "ListPartitionReassignments", 0, 0),
            # Security (issue 19): SASL on SASL_* listeners (served by the connection before
            # any handler), SCRAM credentials (KIP-554).
            _spec(ApiKey.SASL_HANDSHAKE, "SaslHandshake", 0, 1),
            _spec(ApiKey.SASL_AUTHENTICATE, "SaslAuthenticate", 0, 2),
            _spec(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0, 0),
            _spec(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0),
            # ACLs (KIP-140; v1 adds prefixed patterns, KIP-290; a v0 pattern is LITERAL). v2
            # only makes the encoding flexible; kafka-python reads DescribeAcls v2 as a 2.5,
            # below the 3.0 ListOffsets v7 gives (see "One release's level" above). v3 would
            # tell it 3.3 and adds a resource type Sluice has no use for.
            _spec(ApiKey.DESCRIBE_ACLS, "DescribeAcls", 0, 2, handler_min=1),
            _spec(ApiKey.CREATE_ACLS, "CreateAcls", 0, 2, handler_min=1),
            _spec(ApiKey.DELETE_ACLS, "DeleteAcls", 0, 2, handler_min=1),
            # Kafka 4's group protocols, at the versions kio has (Kafka 4.1's). ApiVersions
            # advertises an API only once a handler serves it (``handlers.HANDLERS``).
            # The consumer group protocol (KIP-848): v1 adds subscribed_topic_regex's RE2/J.
            _spec(ApiKey.CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat", 0, 1),
            _spec(ApiKey.CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe", 0, 1),
            # Share groups (KIP-932): v0 was 4.0's early access, which 4.1 dropped.
            _spec(ApiKey.SHARE_GROUP_HEARTBEAT, "ShareGroupHeartbeat", 1, 1),
            _spec(ApiKey.SHARE_GROUP_DESCRIBE, "ShareGroupDescribe", 1, 1),
            _spec(ApiKey.SHARE_FETCH, "ShareFetch", 1, 2),
            _spec(ApiKey.SHARE_ACKNOWLEDGE, "ShareAcknowledge", 1, 2),
            _spec(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, "DescribeShareGroupOffsets", 0, 1),
            _spec(ApiKey.ALTER_SHARE_GROUP_OFFSETS, "AlterShareGroupOffsets", 0, 0),
            _spec(ApiKey.DELETE_SHARE_GROUP_OFFSETS, "DeleteShareGroupOffsets", 0, 0),
        )
    }
)
"""API key → spec, for every API Sluice answers."""


def spec_for(api_key: int) -> ApiSpec | None:
    """The spec of an API key, or None if Sluice does not speak it."""
    return APIS.get(api_key)


#: Schemas kio does not generate, in kio's shape: (api key, version, request|response) → the
#: class, keyed by the class's own ``__api_key__``, ``__version__`` and ``__type__``. The
#: classes are imported from their modules by name rather than the modules through the
#: package (``from . import fetch_v0_3``), which would make this module depend on the
#: package's ``__init__`` that imports it.
_LEGACY: Final[Mapping[tuple[int, int, EntityType], type[Any]]] = MappingProxyType(
    {
        (int(cls.__api_key__), int(cls.__version__), cls.__type__): cls
        for cls in (
            ListOffsetsRequest,
            ListOffsetsResponse,
            ProduceRequestV0,
            ProduceResponseV0,
            ProduceRequestV1,
            ProduceResponseV1,
            ProduceRequestV2,
            ProduceResponseV2,
            FetchRequestV0,
            FetchResponseV0,
            FetchRequestV1,
            FetchResponseV1,
            FetchRequestV2,
            FetchResponseV2,
            FetchRequestV3,
            FetchResponseV3,
            OffsetCommitRequestV0,
            OffsetCommitResponseV0,
            OffsetCommitRequestV1,
            OffsetCommitResponseV1,
            OffsetFetchRequestV0,
            OffsetFetchResponseV0,
            CreateTopicsRequestV0,
            CreateTopicsResponseV0,
            CreateTopicsRequestV1,
            CreateTopicsResponseV1,
            DeleteTopicsRequestV0,
            DeleteTopicsResponseV0,
            WriteTxnMarkersRequestV0,
            WriteTxnMarkersResponseV0,
            OffsetForLeaderEpochRequestV0,
            OffsetForLeaderEpochResponseV0,
            OffsetForLeaderEpochRequestV1,
            OffsetForLeaderEpochResponseV1,
            DescribeConfigsRequestV0,
            DescribeConfigsResponseV0,
            DescribeLogDirsRequestV0,
            DescribeLogDirsResponseV0,
            AlterReplicaLogDirsRequestV0,
            AlterReplicaLogDirsResponseV0,
            DescribeAclsRequestV0,
            DescribeAclsResponseV0,
            CreateAclsRequestV0,
            CreateAclsResponseV0,
            DeleteAclsRequestV0,
            DeleteAclsResponseV0,
        )
    }
)


@cache
def _class(api_key: int, version: int, kind: EntityType) -> type[Any] | None:
    """The payload class of (api key, version, kind): a legacy one, else kio's; None if none."""
    spec = APIS.get(api_key)
    if spec is None:
        return None
    legacy = _LEGACY.get((api_key, version, kind))
    if legacy is not None:
        return legacy
    name = spec.name + ("Request" if kind is EntityType.request else "Response")
    try:
        module = load_payload_module(api_key, version, kind)  # type: ignore[arg-type]
    except (UnknownAPIKey, UnknownEntity):
        return None
    found: type[Any] = getattr(module, name)
    return found


def _payload_class(api_key: int, version: int, kind: EntityType) -> type[Any]:
    cls = _class(api_key, version, kind)
    if cls is None:
        raise KeyError(f"no {kind.name} schema for api key {api_key} version {version}")
    return cls


def request_type(api_key: int, version: int) -> type[Any]:
    """kio's request dataclass for (api_key, version); KeyError if unknown to kio or Sluice."""
    return _payload_class(api_key, version, EntityType.request)


def response_type(api_key: int, version: int) -> type[Any]:
    """kio's response dataclass for (api_key, version); KeyError if unknown."""
    return _payload_class(api_key, version, EntityType.response)


@cache
def first_flexible_version(api_key: int) -> int | None:
    """The first flexible version of an API (Kafka's ``flexibleVersions``), None if none.

    Derived from kio's schemas, which are generated from Kafka's JSON definitions.
    """
    spec = APIS.get(api_key)
    if spec is None:
        return None
    for version in range(0, 64):
        cls = _class(api_key, version, EntityType.request)
        if cls is not None and cls.__flexible__:
            return version
    return None


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version: 2 for flexible API versions, 1 otherwise.

    Also answers for versions newer than kio knows (flexibility never goes away once an API has
    it), so the header of an over-new ApiVersions request can still be parsed.
    """
    first = first_flexible_version(api_key)
    return 2 if first is not None and api_version >= first else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version: 1 for flexible versions, 0 otherwise; always 0 for ApiVersions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    first = first_flexible_version(api_key)
    return 1 if first is not None and api_version >= first else 0


def supported_api_versions(response_version: int = 3) -> tuple[Any, ...]:
    """The ``api_keys`` list of an ApiVersionsResponse of the given version, from ``APIS``.

    Each item is the ``ApiVersion`` dataclass of that response version's kio module, sorted by
    key, carrying the *advertised* ranges.
    """
    try:
        module = load_payload_module(ApiKey.API_VERSIONS, response_version, EntityType.response)
    except (UnknownAPIKey, UnknownEntity):
        raise KeyError(f"no ApiVersions response version {response_version}") from None
    item = module.ApiVersion
    return tuple(
        item(
            api_key=int(spec.key), min_version=spec.advertised_min, max_version=spec.advertised_max
        )
        for spec in sorted(APIS.values(), key=lambda s: s.key)
    )
