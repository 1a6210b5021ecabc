"""JSON Schema parsing, identity and Confluent's compatibility rules (cases after Confluent's
``diff-schema-examples.json`` and its documentation)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.json_schema import parse_json_schema
from sluice.schemas.json_schema_diff import MAX_STEPS, diff


def types(original: Any, update: Any) -> set[tuple[str, str, bool]]:
    return {(d.type, d.path, d.compatible) for d in diff(original, update)}


def incompatible(original: Any, update: Any) -> set[str]:
    return {d.type for d in diff(original, update) if not d.compatible}


def test_normalized_form_ignores_key_order_and_whitespace() -> None:
    a = parse_json_schema('{"type": "object", "properties": {"a": {"type": "string"}}}')
    b = parse_json_schema('{"properties":{"a":{"type":"string"}},\n "type":"object"}')
    assert a.normalized == b.normalized and a.fingerprint == b.fingerprint
    assert a.text == '{"type":"object","properties":{"a":{"type":"string"}}}'
    c = parse_json_schema('{"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}')
    d = parse_json_schema('{"type": "array", "items": [{"type": "integer"}, {"type": "string"}]}')
    assert c.fingerprint != d.fingerprint  # array order means something


@pytest.mark.parametrize(
    "text",
    ["", "[]", "1", '"string"', '{"type": 5}', '{"minLength": -1}', '{"required": "a"}', "{"],
)
def test_invalid_schemas_refused(text: str) -> None:
    with pytest.raises(InvalidSchemaError):
        parse_json_schema(text)


def test_draft_2020_schema_is_checked_against_its_metaschema() -> None:
    draft = "https://json-schema.org/draft/2020-12/schema"
    parse_json_schema(json.dumps({"$schema": draft, "prefixItems": [{"type": "string"}]}))
    with pytest.raises(InvalidSchemaError):
        parse_json_schema(json.dumps({"$schema": draft, "prefixItems": 3}))


OPEN = {"type": "object", "properties": {"a": {"type": "string"}}}
CLOSED = {**OPEN, "additionalProperties": False}
PARTIAL = {**OPEN, "additionalProperties": {"type": "string"}}


def with_property(schema: dict[str, Any], name: str, sub: Any, **extra: Any) -> dict[str, Any]:
    return {**schema, "properties": {**schema["properties"], name: sub}, **extra}


def test_content_models() -> None:
    # Open: adding a typed property breaks, adding an empty one or removing one does not.
    assert incompatible(OPEN, with_property(OPEN, "b", {"type": "integer"})) == {
        "OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
    }
    assert incompatible(OPEN, with_property(OPEN, "b", {})) == set()
    assert incompatible(with_property(OPEN, "b", {"type": "integer"}), OPEN) == set()
    # Closed: an optional property may be added, a required one needs a default; none removed.
    assert incompatible(CLOSED, with_property(CLOSED, "b", {"type": "integer"})) == set()
    assert incompatible(
        CLOSED, with_property(CLOSED, "b", {"type": "integer"}, required=["b"])
    ) == {"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"}
    assert (
        incompatible(
            CLOSED, with_property(CLOSED, "b", {"type": "integer", "default": 0}, required=["b"])
        )
        == set()
    )
    assert incompatible(with_property(CLOSED, "b", {"type": "integer"}), CLOSED) == {
        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
    }
    # Partly open: the additional-properties schema decides.
    assert (
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "#/properties/b",
        True,
    ) in (types(PARTIAL, with_property(PARTIAL, "b", {"type": "string"})))
    assert "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL" in incompatible(
        PARTIAL, with_property(PARTIAL, "b", {"type": "integer"})
    )
    # Opening a closed model is compatible; closing an open one is not.
    assert incompatible(CLOSED, OPEN) == set()
    assert incompatible(OPEN, CLOSED) == {"ADDITIONAL_PROPERTIES_REMOVED"}


def test_required_attribute() -> None:
    required = {**OPEN, "required": ["a"]}
    assert types(OPEN, required) == {("REQUIRED_ATTRIBUTE_ADDED", "#/required/a", False)}
    assert types(required, OPEN) == {("REQUIRED_ATTRIBUTE_REMOVED", "#/required/a", True)}


@pytest.mark.parametrize(
    ("original", "update", "expected"),
    [
        ({"type": "string"}, {"type": "integer"}, ("TYPE_CHANGED", "#/", False)),
        ({"type": "integer"}, {"type": "number"}, ("TYPE_EXTENDED", "#/", True)),
        ({"type": "number"}, {"type": "integer"}, ("TYPE_NARROWED", "#/", False)),
        (
            {"type": "string"},
            {"type": "string", "maxLength": 5},
            ("MAX_LENGTH_ADDED", "#/maxLength", False),
        ),  # noqa: E501
        (
            {"type": "string", "maxLength": 5},
            {"type": "string", "maxLength": 9},
            ("MAX_LENGTH_INCREASED", "#/maxLength", True),
        ),  # noqa: E501
        (
            {"type": "string", "maxLength": 5},
            {"type": "string", "maxLength": 3},
            ("MAX_LENGTH_DECREASED", "#/maxLength", False),
        ),  # noqa: E501
        (
            {"type": "string", "minLength": 5},
            {"type": "string"},
            ("MIN_LENGTH_REMOVED", "#/minLength", True),
        ),  # noqa: E501
        (
            {"type": "string"},
            {"type": "string", "pattern": "^a"},
            ("PATTERN_ADDED", "#/pattern", False),
        ),  # noqa: E501
        (
            {"type": "number", "maximum": 5},
            {"type": "number", "maximum": 9},
            ("MAXIMUM_INCREASED", "#/maximum", True),
        ),  # noqa: E501
        (
            {"type": "number", "minimum": 5},
            {"type": "number", "minimum": 9},
            ("MINIMUM_INCREASED", "#/minimum", False),
        ),  # noqa: E501
        (
            {"type": "number", "multipleOf": 4},
            {"type": "number", "multipleOf": 2},
            ("MULTIPLE_OF_REDUCED", "#/multipleOf", True),
        ),  # noqa: E501
        ({"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, ("ENUM_ARRAY_EXTENDED", "#/enum", True)),
        ({"enum": ["a", "b"]}, {"enum": ["a"]}, ("ENUM_ARRAY_NARROWED", "#/enum", False)),
        ({"type": "string"}, {"type": ["string", "null"]}, ("SUM_TYPE_EXTENDED", "#/", True)),
        (
            {"type": "array", "items": {"type": "integer"}},
            {"type": "array", "items": {"type": "string"}},
            ("TYPE_CHANGED", "#/items", False),
        ),  # noqa: E501
        (
            {"type": "array"},
            {"type": "array", "maxItems": 3},
            ("MAX_ITEMS_ADDED", "#/maxItems", False),
        ),  # noqa: E501
        ({"type": "string"}, {}, None),
        (False, {"type": "string"}, None),
    ],
)
def test_single_rules(original: Any, update: Any, expected: tuple[str, str, bool] | None) -> None:
    found = types(original, update)
    assert found == ({expected} if expected else set())


def test_local_refs_and_recursion() -> None:
    node = {
        "definitions": {
            "node": {
                "type": "object",
                "properties": {"v": {"type": "integer"}, "next": {"$ref": "#/definitions/node"}},
            }
        },
        "$ref": "#/definitions/node",
    }
    assert diff(node, node) == []
    changed = json.loads(json.dumps(node).replace('"integer"', '"string"'))
    assert types(node, changed) == {("TYPE_CHANGED", "#/properties/v", False)}
    # A $ref to the root inside a branch: the walk goes round once (found by the property
    # test below, which recursed without end when a branch was compared through its view).
    original = {"allOf": [{"maxLength": 0, "default": "a"}, {"maxLength": 0}]}
    update = {"allOf": [{"maxLength": 0, "$ref": "#"}]}
    assert types(original, update) == {("PRODUCT_TYPE_NARROWED", "#/", True)}


def test_messages_worded_as_confluent() -> None:
    old = parse_json_schema(json.dumps(OPEN))
    new = parse_json_schema(json.dumps(with_property(OPEN, "b", {"type": "integer"})))
    messages = new.incompatibilities(
        old, reader_role="new", writer_role="old", old_version=3, level="BACKWARD"
    )
    assert messages == [
        '{errorType:"OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", description:"The new schema '
        "has an open content model and has a property or item at path '#/properties/b' which is "
        'missing in the old schema"}',
        "{oldSchemaVersion: 3}",
        "{compatibility: 'BACKWARD'}",
    ]


def test_comparison_work_is_bounded() -> None:
    wide = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string"} for i in range(MAX_STEPS + 1)},
    }
    with pytest.raises(InvalidSchemaError, match=f"more than {MAX_STEPS} steps"):
        diff(wide, wide)


# Schema-shaped documents: the keywords the rules read, with values of the right and the wrong
# shapes, nested.
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b"]))
_schemas = st.recursive(
    st.one_of(
        st.booleans(),
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.one_of(
                    st.sampled_from(["string", "integer", "number", "object", "array", "null"]),
                    st.lists(st.sampled_from(["string", "integer", "null"]), max_size=3),
                ),
                "maxLength": st.integers(0, 5),
                "minimum": st.one_of(st.integers(-2, 2), st.floats(-2, 2)),
                "multipleOf": st.sampled_from([1, 2, 0.5]),
                "enum": st.lists(_scalars, max_size=3),
                "pattern": st.sampled_from(["^a", "(?<!x)b", "["]),
                "default": _scalars,
                "$ref": st.sampled_from(["#", "#/definitions/x", "#/nope", "other.json"]),
            },
        ),
    ),
    lambda inner: st.one_of(
        st.fixed_dictionaries(
            {},
            optional={
                "type": st.just("object"),
                "properties": st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                "required": st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
                "additionalProperties": inner,
                "patternProperties": st.dictionaries(st.sampled_from(["^a", "^b"]), inner),
                "definitions": st.dictionaries(st.just("x"), inner),
            },
        ),
        st.fixed_dictionaries(
            {},
            optional={
                "items": st.one_of(inner, st.lists(inner, max_size=3)),
                "maxItems": st.integers(0, 3),
            },
        ),
        st.fixed_dictionaries({"anyOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"oneOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"allOf": st.lists(inner, min_size=1, max_size=3)}),
        st.fixed_dictionaries({"not": inner}),
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_schemas, _schemas)
def test_any_two_schemas_compare_without_crashing(original: Any, update: Any) -> None:
    """Parsing refuses or accepts; comparing two accepted schemas either way gives
    differences, and a schema compared with itself finds only compatible ones."""
    parsed = []
    for document in (original, update):
        try:
            parsed.append(parse_json_schema(json.dumps(document)))
        except InvalidSchemaError:
            return
    a, b = parsed
    for old, new in ((a, b), (b, a)):
        new.incompatibilities(old, reader_role="new", writer_role="old", old_version=1, level="B")
    assert [d for d in diff(a.document, a.document) if not d.compatible] == []


STR = {"type": "string"}
NUM = {"type": "number"}


@pytest.mark.parametrize(
    ("original", "update", "expected"),
    [
        # A type with an enum is a product of the two; dropping the enum narrows the product.
        ({**STR, "enum": ["a"]}, STR, {("PRODUCT_TYPE_NARROWED", "#/", True)}),
        # Branches pair up whatever their order; the enum branch keeps its original index.
        (
            {"allOf": [STR, {"enum": ["a"]}]},
            {"allOf": [{"enum": ["a", "b"]}, STR]},
            {("ENUM_ARRAY_EXTENDED", "#/allOf/1/enum", True)},
        ),
        (
            {"oneOf": [STR, NUM]},
            {"oneOf": [STR, {"type": "boolean"}]},
            {("COMBINED_TYPE_SUBSCHEMAS_CHANGED", "#/", False)},
        ),
        ({"oneOf": [STR]}, {"anyOf": [STR]}, {("COMBINED_TYPE_EXTENDED", "#/", True)}),
        ({"anyOf": [STR, NUM]}, {"allOf": [STR, NUM]}, {("COMBINED_TYPE_CHANGED", "#/", False)}),
        ({"not": NUM}, {"not": {"type": "integer"}}, {("NOT_TYPE_NARROWED", "#/not", True)}),
        ({"const": 1}, {"const": 2}, {("ENUM_ARRAY_CHANGED", "#/const", False)}),
        # Required in an open content model: old data never had to hold it.
        (
            OPEN,
            with_property(OPEN, "b", {"type": "integer"}, required=["b"]),
            {("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", "#/properties/b", False)},
        ),
        (
            {"dependencies": {"a": ["b"]}},
            {"dependencies": {"a": ["b", "c"]}},
            {("DEPENDENCY_ARRAY_EXTENDED", "#/dependencies/a", False)},
        ),
        (
            {"dependencies": {"a": STR}},
            {"dependencies": {"a": NUM}},
            {("TYPE_CHANGED", "#/dependencies/a", False)},
        ),
        # Tuple items against a partly open model: the additionalItems schema decides.
        (
            {"type": "array", "items": [STR], "additionalItems": STR},
            {"type": "array", "items": [STR, STR], "additionalItems": STR},
            {("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1", True)},
        ),
        (
            {"type": "array", "items": [STR, NUM], "additionalItems": STR},
            {"type": "array", "items": [STR], "additionalItems": STR},
            {
                ("TYPE_CHANGED", "#/items/1", False),
                ("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", "#/items/1", False),
            },
        ),
        ({"type": "array"}, {"type": "array", "items": STR}, {("SCHEMA_ADDED", "#/items", False)}),
        (
            {"additionalItems": True},
            {"additionalItems": False},
            {("ADDITIONAL_ITEMS_REMOVED", "#/additionalItems", False)},
        ),
    ],
)
def test_combined_and_grouped_rules(
    original: Any, update: Any, expected: set[tuple[str, str, bool]]
) -> None:
    assert types(original, update) == expected
