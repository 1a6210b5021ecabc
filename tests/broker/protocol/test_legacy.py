"""The up- and down-conversion rules of the legacy versions, request by request, through
``decode_request`` and ``encode_response`` as the server uses them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from sluice.broker.protocol import apis
from sluice.broker.protocol.apis import APIS, ApiKey
from sluice.broker.protocol.build import build
from sluice.broker.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from sluice.broker.protocol.errors import LocalProtocolError
from sluice.broker.protocol.legacy import up_convert


def _through(key: int, version: int, values: dict[str, Any]) -> Any:
    request = decode_request(
        encode_request(3, "c", build(apis.request_type(key, version), values))[4:]
    )
    assert request.header.wire_version == version
    assert request.api_version == APIS[key].handler_min
    assert request.body.__version__ == APIS[key].handler_min
    return request


def test_metadata_v0_empty_list_is_every_topic() -> None:
    assert _through(ApiKey.METADATA, 0, {"topics": []}).body.topics is None
    named = _through(ApiKey.METADATA, 0, {"topics": [{"name": "t"}]}).body
    assert [t.name for t in named.topics] == ["t"]


def test_offset_commit_v0_and_v1() -> None:
    partition = {"partition_index": 0, "committed_offset": 5, "committed_metadata": None}
    topics = [{"name": "t", "partitions": [partition]}]
    v0 = _through(ApiKey.OFFSET_COMMIT, 0, {"group_id": "g", "topics": topics}).body
    assert (v0.generation_id_or_member_epoch, v0.member_id) == (-1, "")
    assert v0.retention_time == timedelta(milliseconds=-1)
    v1 = _through(
        ApiKey.OFFSET_COMMIT,
        1,
        {
            "group_id": "g",
            "generation_id_or_member_epoch": 4,
            "member_id": "m",
            "topics": [{"name": "t", "partitions": [partition | {"commit_timestamp": 9}]}],
        },
    ).body
    assert (v1.generation_id_or_member_epoch, v1.member_id) == (4, "m")
    assert v1.topics[0].partitions[0].committed_offset == 5


def test_fetch_v0_to_v4_defaults() -> None:
    values = {
        "replica_id": -1,
        "max_wait": 100,
        "min_bytes": 1,
        "topics": [
            {"topic": "t", "partitions": [
                {"partition": 0, "fetch_offset": 3, "partition_max_bytes": 1000}]}
        ],
    }  # fmt: skip
    v0 = _through(ApiKey.FETCH, 0, values).body
    assert (v0.max_bytes, v0.isolation_level) == (2**31 - 1, 0)
    v3 = _through(ApiKey.FETCH, 3, values | {"max_bytes": 4096}).body
    assert v3.max_bytes == 4096


def test_acl_v0_patterns_are_literal() -> None:
    creation = {
        "resource_type": 2, "resource_name": "t", "principal": "User:a", "host": "*",
        "operation": 3, "permission_type": 3,
    }  # fmt: skip
    body = _through(ApiKey.CREATE_ACLS, 0, {"creations": [creation]}).body
    assert body.creations[0].resource_pattern_type == 3
    filt = {
        "resource_type_filter": 1, "resource_name_filter": None, "principal_filter": None,
        "host_filter": None, "operation": 1, "permission_type": 1,
    }  # fmt: skip
    assert _through(ApiKey.DESCRIBE_ACLS, 0, filt).body.pattern_type_filter == 3
    assert (
        _through(ApiKey.DELETE_ACLS, 0, {"filters": [filt]}).body.filters[0].pattern_type_filter
        == 3
    )


def test_describe_configs_v0_is_default_from_config_source() -> None:
    request = _through(
        ApiKey.DESCRIBE_CONFIGS,
        0,
        {"resources": [{"resource_type": 2, "resource_name": "t", "configuration_keys": None}]},
    )
    assert request.body.include_synonyms is False

    def entry(name: str, source: int) -> dict[str, Any]:
        return {"name": name, "value": "x", "read_only": False, "config_source": source,
                "is_sensitive": False, "synonyms": []}  # fmt: skip

    response = build(
        apis.response_type(ApiKey.DESCRIBE_CONFIGS, 1),
        {
            "throttle_time": 0,
            "results": [
                {"error_code": 0, "error_message": None, "resource_type": 2,
                 "resource_name": "t", "configs": [entry("a", 5), entry("b", 1)]}
            ],
        },
    )  # fmt: skip
    wire = encode_response(request.header, response)
    corr, decoded = decode_response(wire[4:], ApiKey.DESCRIBE_CONFIGS, 0)
    assert corr == 3
    assert [(c.name, c.is_default) for c in decoded.results[0].configs] == [
        ("a", True),
        ("b", False),
    ]


def test_offset_for_leader_epoch_v0_response_drops_the_epoch() -> None:
    request = _through(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        0,
        {"topics": [{"topic": "t", "partitions": [{"partition": 0, "leader_epoch": 2}]}]},
    )
    assert request.body.topics[0].partitions[0].current_leader_epoch == -1
    response = build(
        apis.response_type(ApiKey.OFFSET_FOR_LEADER_EPOCH, 2),
        {"throttle_time": 0, "topics": [{"topic": "t", "partitions": [
            {"error_code": 0, "partition": 0, "leader_epoch": 2, "end_offset": 42}]}]},
    )  # fmt: skip
    _, decoded = decode_response(
        encode_response(request.header, response)[4:], ApiKey.OFFSET_FOR_LEADER_EPOCH, 0
    )
    assert [(p.partition, p.end_offset) for p in decoded.topics[0].partitions] == [(0, 42)]


def test_a_target_field_without_value_or_default_is_our_bug() -> None:
    from kio.schema.describe_log_dirs.v1.request import DescribeLogDirsRequest

    class Bare:
        pass

    with pytest.raises(LocalProtocolError, match="expected a value or a default for topics"):
        up_convert(ApiKey.DESCRIBE_LOG_DIRS, Bare(), DescribeLogDirsRequest)


@pytest.mark.parametrize(
    ("key", "version"),
    [(k, v) for k, s in sorted(APIS.items()) for v in range(s.min_version, s.handler_min)],
)
def test_every_legacy_version_is_non_flexible_header_v1(key: int, version: int) -> None:
    assert apis.request_header_version(key, version) == 1
    assert apis.response_header_version(key, version) == 0
