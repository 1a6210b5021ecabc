"""Protobuf parsing (``.proto`` text and base64 descriptors), identity and Confluent's
compatibility rules (cases after Confluent's ``protobuf-provider`` diff tests)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.protobuf_schema import parse_protobuf_schema
from sluice.schemas.protobuf_schema_diff import diff

BASE = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  Line line = 3;
  oneof payment { string card = 4; string iban = 5; }
  map<string, int32> counts = 6;
  google.protobuf.Timestamp at = 7;
  Status status = 8;
}
message Line { int32 qty = 1; }
enum Status { NEW = 0; PAID = 1; }
"""


def differences(original: str, update: str) -> set[tuple[str, str, bool]]:
    a, b = parse_protobuf_schema(original), parse_protobuf_schema(update)
    return {(d.type, d.path, d.compatible) for d in diff(a.file, b.file)}


def incompatible(original: str, update: str) -> set[tuple[str, str]]:
    return {(t, p) for t, p, ok in differences(original, update) if not ok}


def test_text_and_descriptor_are_one_schema() -> None:
    parsed = parse_protobuf_schema(BASE)
    assert parsed.text == BASE
    serialized = parsed.formatted("serialized")
    again = parse_protobuf_schema(serialized)
    assert again.fingerprint == parsed.fingerprint
    # Registered as base64, served as the .proto text printed from it (as Confluent does).
    assert again.text.startswith('syntax = "proto3";\npackage shop;\n'), again.text
    assert parse_protobuf_schema(again.text).fingerprint == parsed.fingerprint
    assert again.formatted("serialized") == serialized
    spaced = parse_protobuf_schema("/* comment */\n" + BASE.replace(";", " ;"))
    assert spaced.fingerprint == parsed.fingerprint
    renamed = parse_protobuf_schema(BASE.replace("string item", "string title"))
    assert renamed.fingerprint != parsed.fingerprint


@pytest.mark.parametrize(
    "text",
    [
        "",
        "message {",
        'syntax = "proto3"; message A { strin x = 1; }',
        'syntax = "proto3"; message A { int32 x = 1; int32 y = 1; }',
        'syntax = "proto3"; import "other.proto"; message A { int32 x = 1; }',
        'syntax = "proto3"; import "/etc/passwd"; message A { int32 x = 1; }',
        "QUJD",  # base64 of no descriptor: read as .proto text, which it is not either
    ],
)
def test_invalid_schemas_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        parse_protobuf_schema(text)


def test_identical_has_no_differences() -> None:
    assert differences(BASE, BASE) == set()


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("int64 id = 1;", "string id = 1;", ("FIELD_SCALAR_KIND_CHANGED", "#/Order/1", False)),
        ("int64 id = 1;", "uint32 id = 1;", None),  # one varint group
        ("int64 id = 1;", "sint64 id = 1;", ("FIELD_SCALAR_KIND_CHANGED", "#/Order/1", False)),
        ("string item = 2;", "bytes item = 2;", None),
        ("string item = 2;", "Line item = 2;", ("FIELD_KIND_CHANGED", "#/Order/2", False)),
        ("string item = 2;", "string title = 2;", ("FIELD_NAME_CHANGED", "#/Order/2", True)),
        ("string item = 2;", "", ("FIELD_REMOVED", "#/Order/2", True)),
        ("string item = 2;", "string item = 2; int32 n = 9;", ("FIELD_ADDED", "#/Order/9", True)),
        ("Status status = 8;", "int32 status = 8;", None),  # an enum is a varint
        (
            "map<string, int32> counts = 6;",
            "map<string, string> counts = 6;",
            ("FIELD_SCALAR_KIND_CHANGED", "#/Order/6", False),
        ),  # noqa: E501
        (
            "string card = 4; string iban = 5;",
            "string card = 4;",
            ("ONEOF_FIELD_REMOVED", "#/Order/payment/5", False),
        ),  # noqa: E501
        (
            "string card = 4; string iban = 5;",
            "string card = 4; string iban = 5; string cash = 10;",
            ("ONEOF_FIELD_ADDED", "#/Order/payment/10", True),
        ),  # noqa: E501
        (
            "message Line { int32 qty = 1; }",
            "message Line { string qty = 1; }",
            ("FIELD_SCALAR_KIND_CHANGED", "#/Line/1", False),
        ),  # noqa: E501
        (
            "enum Status { NEW = 0; PAID = 1; }",
            "enum Status { NEW = 0; PAID = 1; GONE = 2; }",
            ("ENUM_CONST_ADDED", "#/Status/2", True),
        ),  # noqa: E501
    ],
)
def test_single_rules(old: str, new: str, expected: tuple[str, str, bool] | None) -> None:
    assert old in BASE
    found = differences(BASE, BASE.replace(old, new))
    if expected is None:
        assert found == set()
    else:
        assert expected in found


def test_message_rules() -> None:
    without_line = BASE.replace("message Line { int32 qty = 1; }", "").replace("Line line = 3;", "")
    assert ("MESSAGE_REMOVED", "#/Line") in incompatible(BASE, without_line)
    assert incompatible(without_line, BASE) == set()  # a message and a field added
    # A nested message whose field changes makes the field that holds it change type too.
    nested = BASE.replace("message Line { int32 qty = 1; }", "message Line { string qty = 1; }")
    assert incompatible(BASE, nested) == {
        ("FIELD_SCALAR_KIND_CHANGED", "#/Line/1"),
        ("FIELD_NAMED_TYPE_CHANGED", "#/Order/3"),
    }
    moved = BASE.replace("oneof payment { string card = 4; string iban = 5; }", "").replace(
        "int64 id = 1;\n  string item = 2;", "oneof key { int64 id = 1; string item = 2; }"
    )
    assert ("MULTIPLE_FIELDS_MOVED_TO_ONEOF", "#/Order/key") in incompatible(BASE, moved)


def test_recursive_message() -> None:
    tree = 'syntax = "proto3"; message Node { int32 v = 1; repeated Node kids = 2; }'
    assert differences(tree, tree) == set()
    changed = tree.replace("int32 v", "string v")
    assert ("FIELD_SCALAR_KIND_CHANGED", "#/Node/1") in incompatible(tree, changed)


def test_messages_worded_as_confluent() -> None:
    old = parse_protobuf_schema(BASE)
    new = parse_protobuf_schema(BASE.replace("int64 id = 1;", "double id = 1;"))
    assert new.incompatibilities(
        old, reader_role="new", writer_role="old", old_version=1, level="FULL"
    ) == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at '
        "path '#/Order/1' in the new schema does not match its kind in the old schema\"}",
        "{oldSchemaVersion: 1}",
        "{compatibility: 'FULL'}",
    ]


def test_a_type_reached_through_many_fields_is_compared_once() -> None:
    # Ten fields of L1 in L0, ten of L2 in L1...: 10^12 field comparisons without the memo.
    levels = 12
    text = 'syntax = "proto3";\n' + "\n".join(
        f"message L{i} {{ " + " ".join(f"L{i + 1} f{j} = {j};" for j in range(1, 11)) + " }"
        for i in range(levels)
    )
    text += f"\nmessage L{levels} {{ int32 x = 1; }}"
    found = incompatible(text, text.replace("int32 x", "string x"))
    assert ("FIELD_SCALAR_KIND_CHANGED", f"#/L{levels}/1") in found
    assert ("FIELD_NAMED_TYPE_CHANGED", "#/L0/10") in found


def test_labels() -> None:
    proto2 = 'syntax = "proto2"; message A { optional int32 n = 1; optional string s = 2; }'
    repeated = proto2.replace("optional int32", "repeated int32").replace(
        "optional string", "repeated string"
    )
    assert differences(proto2, repeated) == {
        ("FIELD_NUMERIC_LABEL_CHANGED", "#/A/1", False),
        ("FIELD_STRING_OR_BYTES_LABEL_CHANGED", "#/A/2", True),
    }
    # A proto3 field written without a label has none to compare (as in Confluent).
    proto3 = 'syntax = "proto3"; message A { int32 n = 1; }'
    assert differences(proto3, proto3.replace("int32", "repeated int32")) == set()
    explicit = proto3.replace("int32", "optional int32")
    assert ("FIELD_NUMERIC_LABEL_CHANGED", "#/A/1", False) in differences(
        explicit, proto3.replace("int32", "repeated int32")
    )


_tokens = st.sampled_from(
    [
        'syntax = "proto3";',
        'syntax = "proto2";',
        "package p;",
        'import "google/protobuf/timestamp.proto";',
        'import "x.proto";',
        "message M {",
        "message N {",
        "}",
        "int32 a = 1;",
        "repeated string b = 2;",
        "optional N c = 3;",
        "map<string, M> d = 4;",
        "oneof o {",
        "enum E { Z = 0;",
        "google.protobuf.Timestamp t = 5;",
        "required bytes r = 6;",
        "reserved 7;",
        "\x00",
        "\ud800",
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_tokens, max_size=12), st.lists(_tokens, max_size=12))
def test_any_two_texts_parse_or_are_refused_and_compare(
    first: list[str], second: list[str]
) -> None:
    parsed = []
    for tokens in (first, second):
        try:
            parsed.append(parse_protobuf_schema("\n".join(tokens)))
        except InvalidSchemaError:
            return
    a, b = parsed
    assert parse_protobuf_schema(a.formatted("serialized")).fingerprint == a.fingerprint
    for old, new in ((a, b), (b, a)):
        new.incompatibilities(old, reader_role="new", writer_role="old", old_version=1, level="B")
    assert [d for d in diff(a.file, a.file) if not d.compatible] == []


@given(
    st.text(
        alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", max_size=80
    )
)
def test_any_base64_text_parses_or_is_refused(text: str) -> None:
    with contextlib.suppress(InvalidSchemaError):
        parse_protobuf_schema(text)


ONEOFS = """syntax = "proto3";
message M {
  oneof a { string x = 1; string y = 2; }
  oneof b { string z = 3; }
  int32 n = 4;
}
"""


@pytest.mark.parametrize(
    ("new", "expected"),
    [
        # Out of a oneof to the top level: the field keeps its number and type.
        (
            ONEOFS.replace("string y = 2; }", "}\n  string y = 2;"),
            {("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", "#/M/2", True)},
        ),
        # Into another, existing oneof: y and z could both be set before.
        (
            ONEOFS.replace("string y = 2; }", "}").replace(
                "string z = 3;", "string z = 3; string y = 2;"
            ),
            {("FIELD_MOVED_TO_EXISTING_ONEOF", "#/M/b", False)},
        ),
        # A renamed oneof whose member changes type: found under its new name.
        (
            ONEOFS.replace(
                "oneof a { string x = 1; string y = 2; }", "oneof c { string x = 1; int64 y = 2; }"
            ),
            {
                ("ONEOF_REMOVED", "#/M/a", True),
                ("ONEOF_ADDED", "#/M/c", True),
                ("FIELD_SCALAR_KIND_CHANGED", "#/M/c/2", False),
            },
        ),
        # A member dropped while its oneof is renamed: a removal, not a deleted oneof.
        (
            ONEOFS.replace("oneof a { string x = 1; string y = 2; }", "oneof c { string x = 1; }"),
            {
                ("ONEOF_REMOVED", "#/M/a", True),
                ("ONEOF_ADDED", "#/M/c", True),
                ("ONEOF_FIELD_REMOVED", "#/M/a/2", False),
            },
        ),
        # A whole oneof deleted with all its members: compatible.
        (ONEOFS.replace("oneof b { string z = 3; }", ""), {("ONEOF_REMOVED", "#/M/b", True)}),
    ],
)
def test_oneof_membership(new: str, expected: set[tuple[str, str, bool]]) -> None:
    assert differences(ONEOFS, new) == expected
