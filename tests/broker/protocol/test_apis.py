"""The dispatch table against protocol.md and Kafka's flexibleVersions."""

from __future__ import annotations

import pytest

from sluice.broker.protocol import apis
from sluice.broker.protocol.apis import APIS, ApiKey

# (implemented, advertised) per shared/protocol.md, widened (issue 17) to every version Kafka 3.x
# accepts for the APIs Sluice serves: the ones Kafka 4.0 dropped (KIP-896) from legacy schemas.
EXPECTED = {
    0: ((0, 9), (0, 9)),  # v9: v8, flexible (Kafka 2.8's)
    1: ((0, 12), (0, 12)),  # v12: flexible, KIP-320's diverging epochs (Kafka 2.7's)
    2: ((0, 8), (0, 8)),  # v7: MAX_TIMESTAMP (KIP-734), v8: EARLIEST_LOCAL (KIP-405)
    3: ((0, 12), (0, 12)),
    8: ((0, 9), (0, 9)),  # v9 for KIP-848's member epochs (issue 30)
    9: ((0, 7), (0, 7)),  # v6..: Kafka 2.4's table, v7 (require_stable) 2.5's: pinned clients
    10: ((0, 3), (0, 3)),
    11: ((0, 7), (0, 7)),  # v7: the protocol type in the answer (KIP-559)
    12: ((0, 4), (0, 4)),
    13: ((0, 4), (0, 4)),
    14: ((0, 5), (0, 5)),  # v5: the protocol type and name (KIP-559)
    15: ((0, 6), (0, 6)),  # DescribeGroups: authorized operations, instance ids (KIP-430, 345)
    16: ((0, 5), (0, 5)),  # ListGroups: states and types filters (KIP-518, KIP-848)
    17: ((0, 1), (0, 1)),  # SaslHandshake (issue 19)
    18: ((0, 3), (0, 3)),
    19: ((0, 7), (0, 7)),  # v6, v5 of DeleteTopics: Kafka 2.7's (KIP-599's quota error);
    20: ((0, 6), (0, 6)),  # v7, v6: 2.8's (topic ids, KIP-516)
    21: ((0, 2), (0, 2)),
    22: ((0, 4), (0, 4)),
    23: ((0, 4), (0, 4)),  # v4: v3, flexible (Kafka 2.8's)
    # Transactions (issue 18).
    24: ((0, 3), (0, 3)),
    25: ((0, 3), (0, 3)),
    26: ((0, 3), (0, 3)),
    27: ((0, 1), (0, 1)),
    28: ((0, 3), (0, 3)),
    29: ((0, 2), (0, 2)),  # the ACL APIs, at Kafka 2.5's level (see apis.py)
    30: ((0, 2), (0, 2)),
    31: ((0, 2), (0, 2)),
    32: ((0, 4), (0, 4)),
    33: ((0, 2), (0, 2)),
    34: ((0, 2), (0, 2)),
    35: ((0, 4), (0, 4)),
    36: ((0, 2), (0, 2)),  # SaslAuthenticate
    37: ((0, 3), (0, 3)),
    42: ((0, 2), (0, 2)),
    43: ((0, 2), (0, 2)),
    44: ((0, 1), (0, 1)),
    45: ((0, 1), (0, 1)),
    46: ((0, 0), (0, 0)),
    47: ((0, 0), (0, 0)),
    50: ((0, 0), (0, 0)),  # Describe/AlterUserScramCredentials (KIP-554)
    51: ((0, 0), (0, 0)),
    60: ((0, 1), (0, 1)),
    # Kafka 4's group protocols (issue 30), at kio's versions: consumer groups (KIP-848),
    # share groups (KIP-932; from v1, 4.1's).
    68: ((0, 1), (0, 1)),
    69: ((0, 1), (0, 1)),
    76: ((1, 1), (1, 1)),
    77: ((1, 1), (1, 1)),
    78: ((1, 2), (1, 2)),
    79: ((1, 2), (1, 2)),
    90: ((0, 1), (0, 1)),
    91: ((0, 0), (0, 0)),
    92: ((0, 0), (0, 0)),
}

# The lowest version each handler sees, where the codec up-converts the versions below (the
# versions kio does not generate; ListOffsets v0 and Produce v0-2 reach their handlers as they are).
HANDLER_MIN = {1: 4, 3: 1, 8: 2, 9: 1, 19: 2, 20: 1, 23: 2, 27: 1, 29: 1, 30: 1, 31: 1, 32: 1,
               34: 1, 35: 1}  # fmt: skip

# First flexible version of each API, from Kafka's message JSON ("flexibleVersions").
FIRST_FLEXIBLE = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
    18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2, 30: 2,
    31: 2,
    32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 50: 0, 51: 0,
    60: 0, 68: 0, 69: 0, 76: 1, 77: 1, 78: 1, 79: 1, 90: 0, 91: 0, 92: 0,
}  # fmt: skip
# SaslHandshake has no flexible version either.
# OffsetDelete has no flexible version.


def test_table_matches_protocol_md() -> None:
    got = {
        key: ((s.min_version, s.max_version), (s.advertised_min, s.advertised_max))
        for key, s in APIS.items()
    }
    assert got == EXPECTED


def test_handler_min() -> None:
    got = {key: s.handler_min for key, s in APIS.items() if s.handler_min != s.min_version}
    assert got == HANDLER_MIN


@pytest.mark.parametrize("key", sorted(EXPECTED))
def test_schemas_exist_for_every_implemented_version(key: int) -> None:
    spec = APIS[key]
    for version in spec.versions:
        req, resp = apis.request_type(key, version), apis.response_type(key, version)
        assert req.__api_key__ == key and req.__version__ == version
        assert resp.__api_key__ == key and resp.__version__ == version
        assert req.__name__.startswith(spec.name + "Request")
        assert resp.__name__.startswith(spec.name + "Response")


@pytest.mark.parametrize(("key", "first"), sorted(FIRST_FLEXIBLE.items()))
def test_flexible_versions(key: int, first: int) -> None:
    assert apis.first_flexible_version(key) == first
    assert apis.request_header_version(key, first - 1) == 1
    assert apis.request_header_version(key, first) == 2
    # Beyond what kio knows, flexibility stays.
    assert apis.request_header_version(key, 99) == 2


def test_flexible_versions_in_the_implemented_ranges() -> None:
    """Produce and Fetch are implemented up to their first flexible versions (v9, v12); the
    others up to at least theirs (Kafka 2.4's table, which kafka-python pinned to 2.4 sends
    without negotiating), as Kafka 3.x answers them."""
    flexible = {
        (key, v)
        for key, spec in APIS.items()
        for v in spec.versions
        if apis.request_header_version(key, v) == 2
    }
    expected = {(ApiKey.API_VERSIONS, 3), (ApiKey.PRODUCE, 9), (ApiKey.FETCH, 12)} | {
        (key, v)
        for key in (
            2,
            3,
            8,
            9,
            10,
            11,
            12,
            13,
            14,
            15,
            16,
            19,
            20,
            21,
            22,
            23,
            24,
            25,
            26,
            27,
            28,
            29,
            30,
            31,
            32,
            33,
            34,
            35,
            36,
            37,
            42,
            43,
            44,
            45,
            46,
            50,
            51,
            60,
            68,
            69,
            76,
            77,
            78,
            79,
            90,
            91,
            92,
        )
        for v in APIS[key].versions
        if v >= FIRST_FLEXIBLE[key]
    }
    assert flexible == expected
    assert apis.first_flexible_version(ApiKey.OFFSET_DELETE) is None
    assert apis.first_flexible_version(ApiKey.SASL_HANDSHAKE) is None


def test_response_header_versions() -> None:
    # ApiVersions always answers with header v0, even at v3 (flexible) and beyond.
    assert apis.response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert apis.response_header_version(ApiKey.API_VERSIONS, 9) == 0
    assert apis.response_header_version(ApiKey.METADATA, 8) == 0
    assert apis.response_header_version(ApiKey.METADATA, 9) == 1


@pytest.mark.parametrize("response_version", [0, 1, 2, 3])
def test_supported_api_versions(response_version: int) -> None:
    keys = apis.supported_api_versions(response_version)
    assert [k.api_key for k in keys] == sorted(EXPECTED)
    produce = keys[0]
    assert (produce.min_version, produce.max_version) == (0, 9)  # advertised, not implemented
    module = apis.response_type(18, response_version).__module__
    assert all(type(k).__module__ == module for k in keys)


def test_unknown_key() -> None:
    assert apis.spec_for(4) is None  # LeaderAndIsr: not for clients
    with pytest.raises(KeyError):
        apis.request_type(4, 0)
    with pytest.raises(KeyError):
        apis.request_type(0, 99)  # no Produce v99 anywhere
    with pytest.raises(KeyError):
        apis.request_type(24, 9)


def test_clients_infer_kafka_3_0_from_what_is_advertised() -> None:
    # kafka-python infers the broker's release from the advertised maxima and, given an older
    # api_version of its own, speaks that release's versions of every API (no negotiation).
    # ListOffsets v7 (MAX_TIMESTAMP, which librdkafka's admin ListOffsets needs) is 3.0's
    # level; every other API its inference reads stays at or below 2.8's (see apis.py).
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.broker_version_data import infer_broker_version_from_api_versions

    advertised = {
        int(v.api_key): (v.min_version, v.max_version) for v in apis.supported_api_versions()
    }
    assert infer_broker_version_from_api_versions(advertised) == (3, 0)
    # Without ListOffsets v7 it would be 2.8 (Produce v9): nothing else reaches above it.
    without = {**advertised, int(ApiKey.LIST_OFFSETS): (0, 6)}
    assert infer_broker_version_from_api_versions(without) == (2, 8)


def test_kafka_python_pinned_to_2_4_sends_only_served_versions() -> None:
    # Inferring 3.0, kafka-python pinned to 2.4.0 (its own integration suite is) sends its
    # 2.4 table unnegotiated: every version of it that it would send must be served.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.broker_version_data import BrokerVersionData

    pinned = BrokerVersionData((2, 4, 0))
    assert pinned < BrokerVersionData(api_versions={
        int(v.api_key): (v.min_version, v.max_version) for v in apis.supported_api_versions()
    })  # fmt: skip
    unserved = {
        key: high
        for key, (_low, high) in pinned.api_versions.items()
        if key in APIS and high > APIS[key].max_version
    }
    assert unserved == {}


# What kafka-python pinned to each release sends above what Sluice serves (its table's maximum:
# kafka-python 3 implements every version of these tables). The group and ACL versions of
# 2.5-2.8 are served, and so are 2.7's Fetch v12 and 2.8's Produce v9 (the flexible v8),
# CreateTopics v7 and DeleteTopics v6 (topic ids, KIP-516): nothing is left.
UNSERVED_WHEN_PINNED = {
    (2, 5, 0): {},
    (2, 6, 0): {},
    (2, 7, 0): {},
    (2, 8, 0): {},
}


@pytest.mark.parametrize("release", sorted(UNSERVED_WHEN_PINNED))
def test_kafka_python_pinned_to_2_5_to_2_8(release: tuple[int, ...]) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka.protocol.broker_version_data import BrokerVersionData

    pinned = BrokerVersionData(release)
    assert pinned < BrokerVersionData(api_versions={
        int(v.api_key): (v.min_version, v.max_version) for v in apis.supported_api_versions()
    })  # fmt: skip
    unserved = {
        key: high
        for key, (_low, high) in pinned.api_versions.items()
        if key in APIS and high > APIS[key].max_version
    }
    assert unserved == UNSERVED_WHEN_PINNED[release]
