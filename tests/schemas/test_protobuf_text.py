"""The ``.proto`` printer (``sluice.schemas.protobuf_text``) and the registry's use of it.

Round trip: each text is compiled with the registry's own protoc path
(``parse_protobuf_schema``), printed, compiled again, and the normalized form (the descriptor
an id is derived from) must be identical — for texts covering each feature the printer writes
and for protobuf's own well-known ``.proto`` files. A descriptor the printer cannot write
keeps its base64 as text. Through the HTTP API: the base64 form is served as ``.proto`` text,
``?format=serialized`` as base64, under the id the text has.
"""

from __future__ import annotations

import base64
import re
from importlib import resources

import pytest
from google.protobuf import descriptor_pb2

from sluice.schemas.protobuf_schema import parse_protobuf_schema
from sluice.schemas.protobuf_text import UnprintableSchema, print_proto
from sluice.schemas.schema_type import ResolvedReference
from tests.schemas.test_registry_schema_types import http, register

PROTO3 = """syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import public "google/protobuf/duration.proto";
option java_package = "com.example.shop";
option java_outer_classname = "ShopProto";
option java_multiple_files = true;
option go_package = "example.com/shop/v1;shopv1";
option csharp_namespace = "Example.Shop";
option optimize_for = CODE_SIZE;
option cc_enable_arenas = true;
option deprecated = true;
message Order {
  option deprecated = true;
  reserved 9, 12 to 14, 1000 to max;
  reserved "legacy", "old_total";
  int64 id = 1;
  optional string note = 2;
  repeated int32 codes = 3 [packed = false];
  map<string, Line> lines = 4;
  map<int64, Status> states = 5;
  oneof payment {
    option uninterpreted_option_free = 1;
    string card = 6;
    Wire wire = 7;
  }
  google.protobuf.Timestamp placed_at = 8 [deprecated = true];
  int64 big = 10 [jstype = JS_STRING];
  string display_name = 11 [json_name = "label"];
  message Wire { string iban = 1; bytes memo = 2; }
  enum Kind { KIND_UNSPECIFIED = 0; KIND_GIFT = 1 [deprecated = true]; }
  Kind kind = 15;
  optional Kind maybe_kind = 16;
}
message Line { int32 qty = 1; double price = 2; float weight = 3; sint64 delta = 4;
  fixed32 a = 5; fixed64 b = 6; sfixed32 c = 7; sfixed64 d = 8; uint32 e = 9; uint64 f = 10;
  bool g = 11; }
enum Status {
  option allow_alias = true;
  reserved 5, 7 to 9, 100 to max;
  reserved "GONE";
  NEW = 0;
  PAID = 1;
  SETTLED = 1;
}
service Orders {
  option deprecated = true;
  rpc Get (Order) returns (Order);
  rpc Watch (Order) returns (stream Order) { option idempotency_level = NO_SIDE_EFFECTS; }
  rpc Upload (stream Line) returns (Order) { option deprecated = true; }
  rpc Chat (stream Line) returns (stream Line);
}
""".replace("    option uninterpreted_option_free = 1;\n", "")

PROTO2 = r"""syntax = "proto2";
package legacy;
message Account {
  required int64 id = 1;
  optional string name = 2 [default = "quote \" back\\slash tab\t nul\000 é"];
  optional bytes blob = 3 [default = "\001\377abc\""];
  optional double ratio = 4 [default = -inf];
  optional float scale = 5 [default = nan];
  optional float factor = 6 [default = 1.5e+10];
  optional Tier tier = 7 [default = GOLD];
  optional bool active = 8 [default = true];
  optional int32 small = 9 [default = -42];
  optional uint64 large = 10 [default = 18446744073709551615];
  repeated int32 packed_codes = 11 [packed = true];
  optional string lazy_ref = 12 [ctype = CORD];
  optional Account parent = 13 [lazy = true];
  extensions 100 to 199;
  extensions 1000 to max;
  extend Account { optional string nested_ext = 150; }
  enum Tier { BASIC = 1; GOLD = 2; }
  oneof contact { string email = 14; string phone = 15 [default = "none"]; }
}
message Bag { option message_set_wire_format = true; extensions 4 to max; }
message Survey {
  message Before { optional int32 x = 1; }
  optional group Answer = 1 { optional string text = 2; optional Before before = 3; }
  repeated group Choice = 4 [deprecated = true] {
    required int32 rank = 5;
    message Inside { optional int32 y = 1; }
    optional Inside inside = 6;
  }
  message Between { optional int32 z = 1; }
  oneof kind { group Free = 7 { optional string note = 8; } int32 fixed = 9; }
  map<string, Between> betweens = 10;
}
extend Account {
  optional int32 score = 100;
  repeated string tags = 101;
}
extend Account { optional Account.Tier other_tier = 102 [default = BASIC]; }
"""

NO_PACKAGE = """syntax = "proto3";
import weak "google/protobuf/empty.proto";
message Top { message Mid { message Low { Top up = 1; } Low low = 1; } Mid mid = 1;
  map<string, Top.Mid.Low> lows = 2; map<bool, bytes> flags = 3; }
"""

CUSTOM_OPTIONS = """syntax = "proto3";
package acme.opts;
import "google/protobuf/descriptor.proto";
message Rule { string name = 1; int32 level = 2; repeated string tags = 3; }
enum Sensitivity { PUBLIC = 0; PII = 1; }
extend google.protobuf.FieldOptions {
  Sensitivity sensitivity = 50001;
  repeated string aliases = 50002;
  Rule rule = 50003;
}
extend google.protobuf.MessageOptions { bool audited = 50001; }
extend google.protobuf.FileOptions { string owner = 50001; }
option (owner) = "team-a";
option java_package = "com.acme.opts";
message Customer {
  option (audited) = true;
  string email = 1 [(sensitivity) = PII, (aliases) = "mail", (aliases) = "e-mail"];
  string name = 2 [(rule) = { name: "len" level: 2 tags: ["a", "b"] }, deprecated = true];
}
"""

EDITIONS = """edition = "2023";
package ed;
import "google/protobuf/timestamp.proto";
option features.field_presence = IMPLICIT;
option java_multiple_files = true;
message Event {
  int32 id = 1;
  int32 must = 2 [features.field_presence = LEGACY_REQUIRED];
  Event child = 3 [features.message_encoding = DELIMITED];
  repeated int32 codes = 4 [features.repeated_field_encoding = EXPANDED];
  map<string, int32> counts = 5;
  google.protobuf.Timestamp at = 6;
  oneof body { string text = 7; bytes raw = 8; }
  extensions 100 to 199;
}
extend Event { int32 extra = 100; }
enum Level { option features.enum_type = CLOSED; LOW = 1; HIGH = 2; }
"""

WELL_KNOWN = [
    "any",
    "api",
    "descriptor",
    "duration",
    "empty",
    "field_mask",
    "source_context",
    "struct",
    "timestamp",
    "type",
    "wrappers",
]
_INCLUDE = resources.files("grpc_tools") / "_proto" / "google" / "protobuf"


def _well_known(name: str) -> str:
    return (_INCLUDE / f"{name}.proto").read_text(encoding="utf-8")


def _assert_round_trip(text: str, references: list[ResolvedReference] | None = None) -> str:
    """Compile ``text``, register its descriptor's base64 form as a serializer would (the
    registry prints it, with the pool that knows the file's custom options), compile the
    printed text again: the same normalized form. Returns the printed text."""
    refs = references or []
    parsed = parse_protobuf_schema(text, refs)
    serialized = parsed.formatted("serialized")
    printed = parse_protobuf_schema(serialized, refs).text
    assert printed != serialized, f"the printed text was refused; the base64 was kept for:\n{text}"
    again = parse_protobuf_schema(printed, refs)
    assert again.normalized == parsed.normalized, f"printed text compiles differently:\n{printed}"
    # Without custom options, the printer alone (no pool) gives the same text.
    if not re.search(r"\(\.[\w.]+\) =", printed):
        assert print_proto(parsed.file) == printed
    return printed


@pytest.mark.parametrize(
    "text",
    [PROTO3, PROTO2, NO_PACKAGE, CUSTOM_OPTIONS, EDITIONS],
    ids=["proto3", "proto2", "nested", "custom-options", "editions"],
)
def test_feature_texts_round_trip(text: str) -> None:
    _assert_round_trip(text)


@pytest.mark.parametrize("name", WELL_KNOWN)
def test_well_known_files_round_trip(name: str) -> None:
    _assert_round_trip(_well_known(name))


def test_printed_form() -> None:
    printed = _assert_round_trip(PROTO3)
    for line in [
        'syntax = "proto3";\npackage shop.v1;\n\nimport "google/protobuf/timestamp.proto";\n'
        'import public "google/protobuf/duration.proto";\n\noption java_package = ',
        "  optional string note = 2;\n  repeated int32 codes = 3 [packed = false];\n"
        "  map<string, .shop.v1.Line> lines = 4;\n",
        "  oneof payment {\n    string card = 6;\n    .shop.v1.Order.Wire wire = 7;\n  }\n",
        '  string display_name = 11 [json_name = "label"];\n',
        "  reserved 9, 12 to 14, 1000 to max;\n",
        "  reserved 5, 7 to 9, 100 to max;\n",
        "  rpc Watch (.shop.v1.Order) returns (stream .shop.v1.Order) {\n"
        "    option idempotency_level = NO_SIDE_EFFECTS;\n  }\n",
        "  rpc Chat (stream .shop.v1.Line) returns (stream .shop.v1.Line);\n",
        "enum Status {\n  option allow_alias = true;\n",
    ]:
        assert line in printed, f"expected {line!r} in:\n{printed}"
    assert "MapEntry" not in printed and "LinesEntry" not in printed
    assert "_maybe_kind" not in printed  # proto3 optional's synthetic oneof
    assert "json_name" not in printed.replace('json_name = "label"', "")
    custom = _assert_round_trip(CUSTOM_OPTIONS)
    for line in [
        'option (.acme.opts.owner) = "team-a";\n',
        "  option (.acme.opts.audited) = true;\n",
        '  string email = 1 [(.acme.opts.sensitivity) = PII, (.acme.opts.aliases) = "mail", '
        '(.acme.opts.aliases) = "e-mail"];\n',
    ]:
        assert line in custom, f"expected {line!r} in:\n{custom}"


def test_a_schema_importing_a_reference_round_trips() -> None:
    common = parse_protobuf_schema(
        'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; }\n'
    )
    refs = [ResolvedReference("common/money.proto", common)]
    text = (
        'syntax = "proto3";\npackage billing;\nimport "common/money.proto";\n'
        "message Invoice { common.Money total = 1; repeated common.Money lines = 2; }\n"
    )
    printed = _assert_round_trip(text, refs)
    assert 'import "common/money.proto";' in printed and ".common.Money total = 1;" in printed


def test_what_cannot_be_printed_keeps_its_base64() -> None:
    group = parse_protobuf_schema(
        'syntax = "proto2";\nmessage A { extensions 10 to 20; }\n'
        "extend A { optional group G = 10 { optional int32 x = 11; } }\n"
    )
    with pytest.raises(UnprintableSchema, match="group"):
        print_proto(group.file)
    serialized = group.formatted("serialized")
    kept = parse_protobuf_schema(serialized)
    assert (kept.text, kept.normalized) == (serialized, group.normalized)
    # Printable, but not to the same descriptor: a map entry not named as protoc names it
    # prints as a map whose entry protoc calls CountsEntry. The registration check keeps
    # the base64 (and the identity is the registered descriptor's).
    mapped = parse_protobuf_schema(
        'syntax = "proto3";\nmessage A { map<string, int32> counts = 1; }\n'
    )
    renamed = descriptor_pb2.FileDescriptorProto()
    renamed.CopyFrom(mapped.file)
    renamed.message_type[0].nested_type[0].name = "Tally"
    renamed.message_type[0].field[0].type_name = ".A.Tally"
    assert "map<string, int32> counts = 1;" in print_proto(renamed)
    serialized = base64.standard_b64encode(renamed.SerializeToString()).decode("ascii")
    kept = parse_protobuf_schema(serialized)
    assert kept.text == serialized and kept.normalized != mapped.normalized


def test_registry_serves_a_base64_registration_as_proto_text(
    registry_url: str, subject: str
) -> None:
    serialized = parse_protobuf_schema(PROTO3).formatted("serialized")
    status, body = register(registry_url, subject, serialized, "PROTOBUF")
    assert status == 200, body
    schema_id = body["id"]
    status, body = http(registry_url, "GET", f"/schemas/ids/{schema_id}")
    assert (status, body["schemaType"]) == (200, "PROTOBUF"), body
    assert body["schema"] == print_proto(parse_protobuf_schema(PROTO3).file)
    status, body = http(registry_url, "GET", f"/schemas/ids/{schema_id}?format=serialized")
    assert status == 200 and base64.b64decode(body["schema"]), body
    assert (
        parse_protobuf_schema(body["schema"]).normalized == parse_protobuf_schema(PROTO3).normalized
    )
    # The text finds the id the base64 got, in another subject too.
    assert register(registry_url, subject + "-text", PROTO3, "PROTOBUF") == (200, {"id": schema_id})
