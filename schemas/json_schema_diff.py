"""Confluent's compatibility rules for JSON Schema: the differences between two schemas.

:func:`diff` walks an *original* schema (the one data was written with) and an *update* (the
one that reads it) side by side and returns every :class:`Difference`, each with Confluent's
``Difference.Type`` name, the JSON path where it was found (``#/properties/name/maxLength``)
and whether Confluent counts it as compatible (its ``SchemaDiff.COMPATIBLE_CHANGES``). The
rules follow Confluent's ``json-schema-provider`` ``diff`` package:

* a schema is classified as Confluent's parser (everit) would: empty (``{}``/``true``), false,
  string, number (``integer`` is a number that requires integers), boolean, null, object,
  array, enum, const, combined (``anyOf``/``oneOf``/``allOf``, and a ``type`` list), not;
  a local ``$ref`` is followed. Two schemas of different classes are ``TYPE_CHANGED``
  unless the original is ``false`` or the update is empty (which read anything).
* objects: an *open content model* (``additionalProperties`` absent or ``true``, no
  ``patternProperties``) may lose properties but gains one only with an empty schema
  (``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`` is incompatible); a closed one gains optional
  properties but may not lose one (``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``); a partly
  open one checks the property against the pattern or additional schema; a property newly
  required needs a default (``REQUIRED_ATTRIBUTE_ADDED``).
* bounds: a bound added or tightened is incompatible (``MAX_LENGTH_ADDED``,
  ``MINIMUM_INCREASED``…), removed or loosened is compatible; ``integer`` → ``number`` is
  ``TYPE_EXTENDED`` (compatible), the reverse ``TYPE_NARROWED``.
* enums may grow (``ENUM_ARRAY_EXTENDED``); a sum type (``anyOf``/``oneOf``) may grow and a
  single type may become one of its branches (``SUM_TYPE_EXTENDED``).

Not covered (Confluent checks them; Sluice reports nothing): ``dependencies``,
``unevaluated*``, ``contains``, remote ``$ref``. Recursion is bounded: a ``$ref`` cycle is
gone round once per walk, and documents are at most ``MAX_SAFE_DEPTH`` deep. Work is bounded:
a walk of more than :data:`MAX_STEPS` comparisons raises 42201.

Pure functions over decoded JSON; thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sluice.schemas.errors import InvalidSchemaError

# Comparing two schemas takes a step per pair of subschemas walked. Combined types try each branch
# of one side against the branches of the other, so branches nested in branches multiply the
# steps; this bound keeps a hostile pair to about a second of the registry's lock.
MAX_STEPS = 200_000

COMPATIBLE_CHANGES = frozenset(
    [
        "ID_CHANGED",
        "DESCRIPTION_CHANGED",
        "TITLE_CHANGED",
        "DEFAULT_CHANGED",
        "SCHEMA_REMOVED",
        "TYPE_EXTENDED",
        "MAX_LENGTH_INCREASED",
        "MAX_LENGTH_REMOVED",
        "MIN_LENGTH_DECREASED",
        "MIN_LENGTH_REMOVED",
        "PATTERN_REMOVED",
        "MAXIMUM_INCREASED",
        "MAXIMUM_REMOVED",
        "MINIMUM_DECREASED",
        "MINIMUM_REMOVED",
        "EXCLUSIVE_MAXIMUM_INCREASED",
        "EXCLUSIVE_MAXIMUM_REMOVED",
        "EXCLUSIVE_MINIMUM_DECREASED",
        "EXCLUSIVE_MINIMUM_REMOVED",
        "MULTIPLE_OF_REDUCED",
        "MULTIPLE_OF_REMOVED",
        "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
        "REQUIRED_ATTRIBUTE_REMOVED",
        "DEPENDENCY_ARRAY_NARROWED",
        "DEPENDENCY_ARRAY_REMOVED",
        "DEPENDENCY_SCHEMA_REMOVED",
        "MAX_PROPERTIES_INCREASED",
        "MAX_PROPERTIES_REMOVED",
        "MIN_PROPERTIES_DECREASED",
        "MIN_PROPERTIES_REMOVED",
        "ADDITIONAL_PROPERTIES_ADDED",
        "ADDITIONAL_PROPERTIES_EXTENDED",
        "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
        "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
        "MAX_ITEMS_INCREASED",
        "MAX_ITEMS_REMOVED",
        "MIN_ITEMS_DECREASED",
        "MIN_ITEMS_REMOVED",
        "UNIQUE_ITEMS_REMOVED",
        "ADDITIONAL_ITEMS_ADDED",
        "ADDITIONAL_ITEMS_EXTENDED",
        "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
        "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
        "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
        "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
        "ENUM_ARRAY_EXTENDED",
        "COMBINED_TYPE_EXTENDED",
        "PRODUCT_TYPE_NARROWED",
        "SUM_TYPE_EXTENDED",
        "NOT_TYPE_NARROWED",
    ]
)

# Confluent's wording, by group of difference types (its Difference.error()). The first
# placeholder names the update's role, the second the original's, as in Confluent.
_KEYWORD_ADDED = (
    "The keyword at path '{path}' in the {update} schema is not present in the {original} schema"  # noqa: E501
)
_VALUE_INCREASED = "The value at path '{path}' in the {update} schema is more than its value in the {original} schema"  # noqa: E501
_VALUE_DECREASED = "The value at path '{path}' in the {update} schema is less than its value in the {original} schema"  # noqa: E501
_VALUE_CHANGED = (
    "The value at path '{path}' is different between the {update} and {original} schema"  # noqa: E501
)
_NARROWED = "An array or combined type at path '{path}' has fewer elements in the {update} schema than the {original} schema"  # noqa: E501
_EXTENDED = "An array or combined type at path '{path}' has more elements in the {update} schema than the {original} schema"  # noqa: E501
_TYPE_CHANGED = (
    "A type at path '{path}' is different between the {update} schema and the {original} schema"  # noqa: E501
)
_WORDING = {
    **dict.fromkeys(
        [
            "MAXIMUM_ADDED",
            "MINIMUM_ADDED",
            "EXCLUSIVE_MAXIMUM_ADDED",
            "EXCLUSIVE_MINIMUM_ADDED",
            "MULTIPLE_OF_ADDED",
            "MAX_LENGTH_ADDED",
            "MIN_LENGTH_ADDED",
            "PATTERN_ADDED",
            "REQUIRED_ATTRIBUTE_ADDED",
            "MAX_PROPERTIES_ADDED",
            "MIN_PROPERTIES_ADDED",
            "MAX_ITEMS_ADDED",
            "MIN_ITEMS_ADDED",
            "UNIQUE_ITEMS_ADDED",
            "ADDITIONAL_ITEMS_REMOVED",
            "ADDITIONAL_PROPERTIES_REMOVED",
        ],
        _KEYWORD_ADDED,
    ),
    **dict.fromkeys(
        [
            "MIN_LENGTH_INCREASED",
            "MINIMUM_INCREASED",
            "EXCLUSIVE_MINIMUM_INCREASED",
            "MIN_PROPERTIES_INCREASED",
            "MULTIPLE_OF_EXPANDED",
            "MIN_ITEMS_INCREASED",
        ],
        _VALUE_INCREASED,
    ),
    **dict.fromkeys(
        [
            "MAX_LENGTH_DECREASED",
            "MAXIMUM_DECREASED",
            "MAX_ITEMS_DECREASED",
            "EXCLUSIVE_MAXIMUM_DECREASED",
            "MAX_PROPERTIES_DECREASED",
        ],
        _VALUE_DECREASED,
    ),
    **dict.fromkeys(["PATTERN_CHANGED", "MULTIPLE_OF_CHANGED"], _VALUE_CHANGED),
    **dict.fromkeys(
        [
            "ADDITIONAL_ITEMS_NARROWED",
            "ENUM_ARRAY_NARROWED",
            "SUM_TYPE_NARROWED",
            "ADDITIONAL_PROPERTIES_NARROWED",
        ],
        _NARROWED,
    ),
    **dict.fromkeys(["PRODUCT_TYPE_EXTENDED", "SUM_TYPE_EXTENDED"], _EXTENDED),
    **dict.fromkeys(
        [
            "TYPE_CHANGED",
            "TYPE_NARROWED",
            "COMBINED_TYPE_CHANGED",
            "COMBINED_TYPE_SUBSCHEMAS_CHANGED",
            "ENUM_ARRAY_CHANGED",
        ],
        _TYPE_CHANGED,
    ),
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": "The {update} schema has an open content model and has a property or item at path '{path}' which is missing in the {original} schema",  # noqa: E501
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": "The {update} schema has an open content model and has a property or item at path '{path}' which is missing in the {original} schema",  # noqa: E501
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The {update} schema has an unopen content model and has a required property at path '{path}' which is missing in the {original} schema",  # noqa: E501
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The {update} schema has a closed content model and is missing a property or item present at path '{path}' in the {original} schema",  # noqa: E501
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The {update} schema has a closed content model and is missing a property or item present at path '{path}' in the {original} schema",  # noqa: E501
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "A property or item is missing in the {update} schema but present at path '{path}' in the {original} schema and is not covered by its partially open content model",  # noqa: E501
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The {update} schema has a property or item at path '{path}' which is missing in the {original} schema and is not covered by its partially open content model",  # noqa: E501
}


@dataclass(frozen=True)
class Difference:
    """One difference: Confluent's type name and the JSON path where it was found."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def message(self, *, update_role: str, original_role: str) -> str:
        """Confluent's ``{errorType:"…", description:"…"}`` for this difference."""
        wording = _WORDING.get(self.type, "")
        description = wording.format(path=self.path, update=update_role, original=original_role)
        return f'{{errorType:"{self.type}", description:"{description}"}}'


def diff(original: Any, update: Any) -> list[Difference]:
    """Every difference from ``original`` (writer) to ``update`` (reader), in walk order."""
    walk = _Walk(original, update)
    walk.compare(original, update)
    return walk.found


_OBJECT_KEYS = (
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "dependencies",
)
_ARRAY_KEYS = ("items", "additionalItems", "minItems", "maxItems", "uniqueItems")
_STRING_KEYS = ("minLength", "maxLength", "pattern")
_NUMBER_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_BY_TYPE = {"object": "object", "array": "array", "string": "string", "number": "number"}
_BY_TYPE |= {"integer": "number", "boolean": "boolean", "null": "null"}


def _kind(schema: Any) -> str:
    """The class Confluent's parser would give ``schema`` (see the module docstring)."""
    if schema is False:
        return "false"
    if not isinstance(schema, dict):
        return "empty"
    if "enum" in schema:
        return "enum"
    if "const" in schema:
        return "const"
    if any(k in schema for k in ("anyOf", "oneOf", "allOf")) or isinstance(
        schema.get("type"), list
    ):
        return "combined"
    if "not" in schema:
        return "not"
    declared = schema.get("type")
    if isinstance(declared, str):
        return _BY_TYPE.get(declared, "empty")
    for kind, keys in (
        ("object", _OBJECT_KEYS),
        ("array", _ARRAY_KEYS),
        ("string", _STRING_KEYS),
        ("number", _NUMBER_KEYS),
    ):
        if any(k in schema for k in keys):
            return kind
    return "empty"


def _subschemas(schema: dict[str, Any]) -> tuple[str, list[Any]]:
    """A combined schema's criterion and branches; a ``type`` list is an ``anyOf``."""
    for criterion in ("allOf", "anyOf", "oneOf"):
        if isinstance(schema.get(criterion), list):
            return criterion, list(schema[criterion])
    types = schema.get("type")
    rest = {k: v for k, v in schema.items() if k != "type"}
    return "anyOf", [{**rest, "type": t} for t in types] if isinstance(types, list) else []


@dataclass
class _Walk:
    original_root: Any
    update_root: Any
    found: list[Difference] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    entered: set[tuple[int, int]] = field(default_factory=set)  # pairs being compared, by id
    steps: list[int] = field(default_factory=lambda: [0])  # compare() calls, shared by sub-walks

    def add(self, kind: str, attribute: str | None = None) -> None:
        parts = [*self.path, attribute] if attribute else self.path
        self.found.append(Difference(kind, "#/" + "/".join(parts)))

    @contextmanager
    def at(self, *parts: str) -> Iterator[None]:
        self.path.extend(parts)
        try:
            yield
        finally:
            del self.path[len(self.path) - len(parts) :]

    def sub(self) -> _Walk:
        walk = _Walk(self.original_root, self.update_root)
        walk.path = list(self.path)
        walk.entered = set(self.entered)
        walk.steps = self.steps
        return walk

    def compatible_with(self, original: Any, update: Any) -> tuple[bool, list[Difference]]:
        walk = self.sub()
        walk.compare(original, update)
        return all(d.compatible for d in walk.found), walk.found

    def _resolve(self, schema: Any, root: Any) -> Any:
        """Follow local ``$ref`` pointers (``#/definitions/x``); others are left as they are."""
        for _ in range(64):  # a chain of refs to refs; a cycle of pure refs ends here
            if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
                return schema
            ref: str = schema["$ref"]
            if not ref.startswith("#"):
                return schema
            target = root
            for token in filter(None, ref[1:].split("/")):
                token = token.replace("~1", "/").replace("~0", "~")
                if isinstance(target, dict) and token in target:
                    target = target[token]
                elif isinstance(target, list) and token.isdigit() and int(token) < len(target):
                    target = target[int(token)]
                else:
                    return schema
            schema = target
        return schema

    def compare(self, original: Any, update: Any) -> None:
        self.steps[0] += 1
        if self.steps[0] > MAX_STEPS:
            raise InvalidSchemaError(
                f"Invalid schema: comparing it with an earlier schema takes more than {MAX_STEPS} "
                "steps (combined types nested in combined types)"
            )
        original = self._resolve(original, self.original_root)
        update = self._resolve(update, self.update_root)
        # A pair already being compared further up (a $ref back to an enclosing schema) adds
        # nothing new: the walk goes round the cycle once.
        pair = (id(original), id(update))
        if pair in self.entered:
            return
        self.entered.add(pair)
        try:
            self._compare_resolved(original, update)
        finally:
            self.entered.discard(pair)

    def _compare_resolved(self, original: Any, update: Any) -> None:
        o_kind, u_kind = _kind(original), _kind(update)
        if o_kind != "combined" and u_kind == "combined":
            criterion, branches = _subschemas(update)
            if len(branches) == 1:
                ok, found = self.compatible_with(original, branches[0])
                if ok:
                    self.found += found
                    return
            elif criterion in ("anyOf", "oneOf"):
                for branch in branches:
                    ok, found = self.compatible_with(original, branch)
                    if ok:
                        self.found += found
                        self.add("SUM_TYPE_EXTENDED")
                        return
        elif o_kind == "combined" and u_kind != "combined":
            _, branches = _subschemas(original)
            if len(branches) == 1:
                ok, found = self.compatible_with(branches[0], update)
                if ok:
                    self.found += found
                    return
        if o_kind != u_kind:
            if o_kind != "false" and u_kind != "empty":
                self.add("TYPE_CHANGED")
            return
        if isinstance(original, dict) and isinstance(update, dict):
            self._compare_same_kind(o_kind, original, update)

    def _compare_same_kind(
        self, kind: str, original: dict[str, Any], update: dict[str, Any]
    ) -> None:
        for key, name in (
            ("$id", "ID_CHANGED"),
            ("title", "TITLE_CHANGED"),
            ("description", "DESCRIPTION_CHANGED"),
            ("default", "DEFAULT_CHANGED"),
        ):
            if original.get(key) != update.get(key):
                self.add(name)
        if kind == "string":
            self._bounds(original, update, "maxLength", "MAX_LENGTH")
            self._bounds(original, update, "minLength", "MIN_LENGTH")
            self._pattern(original, update)
        elif kind == "number":
            self._number(original, update)
        elif kind == "enum":
            self._enum(original, update)
        elif kind == "combined":
            self._combined(original, update)
        elif kind == "not":
            ok, _ = self.compatible_with(update.get("not"), original.get("not"))
            if not ok:
                self.add("NOT_TYPE_EXTENDED")
        elif kind == "object":
            self._object(original, update)
        elif kind == "array":
            self._array(original, update)

    def _bounds(
        self,
        original: dict[str, Any],
        update: dict[str, Any],
        key: str,
        prefix: str,
    ) -> None:
        """``{prefix}_ADDED/REMOVED/INCREASED/DECREASED`` for the numeric keyword ``key``."""
        old, new = original.get(key), update.get(key)
        if isinstance(old, bool) or isinstance(new, bool) or old == new:
            return
        if old is None:
            self.add(f"{prefix}_ADDED", key)
        elif new is None:
            self.add(f"{prefix}_REMOVED", key)
        elif isinstance(old, int | float) and isinstance(new, int | float):
            self.add(f"{prefix}_INCREASED" if new > old else f"{prefix}_DECREASED", key)

    def _pattern(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        old, new = original.get("pattern"), update.get("pattern")
        if old == new:
            return
        kind = "PATTERN_ADDED" if old is None else "PATTERN_REMOVED" if new is None else None
        self.add(kind or "PATTERN_CHANGED", "pattern")

    def _number(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        self._bounds(original, update, "maximum", "MAXIMUM")
        self._bounds(original, update, "minimum", "MINIMUM")
        self._bounds(original, update, "exclusiveMaximum", "EXCLUSIVE_MAXIMUM")
        self._bounds(original, update, "exclusiveMinimum", "EXCLUSIVE_MINIMUM")
        old, new = original.get("multipleOf"), update.get("multipleOf")
        if old != new:
            if old is None:
                self.add("MULTIPLE_OF_ADDED", "multipleOf")
            elif new is None:
                self.add("MULTIPLE_OF_REMOVED", "multipleOf")
            elif isinstance(old, int | float) and isinstance(new, int | float):
                if new % old == 0:
                    self.add("MULTIPLE_OF_EXPANDED", "multipleOf")
                elif old % new == 0:
                    self.add("MULTIPLE_OF_REDUCED", "multipleOf")
                else:
                    self.add("MULTIPLE_OF_CHANGED", "multipleOf")
        old_integer = original.get("type") == "integer"
        new_integer = update.get("type") == "integer"
        if old_integer and not new_integer:
            self.add("TYPE_EXTENDED")
        elif new_integer and not old_integer:
            self.add("TYPE_NARROWED")

    def _enum(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        old, new = original.get("enum"), update.get("enum")
        if not isinstance(old, list) or not isinstance(new, list) or old == new:
            return
        old_set = {repr(v) for v in old}
        new_set = {repr(v) for v in new}
        if old_set == new_set:
            return
        if new_set >= old_set:
            self.add("ENUM_ARRAY_EXTENDED", "enum")
        elif old_set >= new_set:
            self.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            self.add("ENUM_ARRAY_CHANGED", "enum")

    def _combined(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_criterion, o_branches = _subschemas(original)
        u_criterion, u_branches = _subschemas(update)
        if o_criterion != u_criterion:
            self.add("COMBINED_TYPE_CHANGED")
            return
        unmatched = list(range(len(u_branches)))
        for i, branch in enumerate(o_branches):
            with self.at(o_criterion, str(i)):
                for j in unmatched:
                    ok, found = self.compatible_with(branch, u_branches[j])
                    if ok:
                        self.found += found
                        unmatched.remove(j)
                        break
                else:
                    if len(o_branches) <= len(u_branches):
                        self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")
                        return
        if len(o_branches) < len(u_branches):
            product = o_criterion == "allOf"
            self.add("PRODUCT_TYPE_EXTENDED" if product else "SUM_TYPE_EXTENDED")
        elif len(o_branches) > len(u_branches):
            product = o_criterion == "allOf"
            self.add("PRODUCT_TYPE_NARROWED" if product else "SUM_TYPE_NARROWED")

    def _object(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_props = _mapping(original.get("properties"))
        u_props = _mapping(update.get("properties"))
        o_required = set(_strings(original.get("required")))
        u_required = set(_strings(update.get("required")))
        with self.at("required"):
            for name in o_props:
                if name not in u_props:
                    continue
                with self.at(name):
                    if name in o_required and name not in u_required:
                        self.add("REQUIRED_ATTRIBUTE_REMOVED")
                    elif name in u_required and name not in o_required:
                        with_default = (
                            isinstance(u_props[name], dict) and "default" in u_props[name]
                        )
                        self.add(
                            "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED"
                            if with_default
                            else "REQUIRED_ATTRIBUTE_ADDED"
                        )
        with self.at("properties"):
            for name in list(o_props) + [n for n in u_props if n not in o_props]:
                with self.at(name):
                    self._property(name, original, update, o_props, u_props, u_required)
        self._additional_properties(original, update)
        self._bounds(original, update, "maxProperties", "MAX_PROPERTIES")
        self._bounds(original, update, "minProperties", "MIN_PROPERTIES")

    def _property(
        self,
        name: str,
        original: dict[str, Any],
        update: dict[str, Any],
        o_props: dict[str, Any],
        u_props: dict[str, Any],
        u_required: set[str],
    ) -> None:
        if name not in u_props:
            if _is_open(update):
                self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
                return
            partial = _partial_schema(update, name)
            if partial is not None:
                ok, found = self.compatible_with(o_props[name], partial)
                self.found += found
                self.add(
                    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    if ok
                    else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
            elif o_props[name] is False:
                self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
            else:
                self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        elif name not in o_props:
            if _is_open(original):
                empty = _kind(u_props[name]) == "empty"
                self.add(
                    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                    if empty
                    else "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                )
                return
            partial = _partial_schema(original, name)
            if partial is not None:
                ok, found = self.compatible_with(partial, u_props[name])
                self.found += found
                self.add(
                    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    if ok
                    else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
            if name in u_required:
                with_default = isinstance(u_props[name], dict) and "default" in u_props[name]
                self.add(
                    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
                    if with_default
                    else "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
                )
            else:
                self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            self.compare(o_props[name], u_props[name])

    def _additional_properties(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        with self.at("additionalProperties"):
            o_permits = original.get("additionalProperties", True) is not False
            u_permits = update.get("additionalProperties", True) is not False
            o_schema = _additional_schema(original)
            u_schema = _additional_schema(update)
            if o_permits != u_permits:
                self.add(
                    "ADDITIONAL_PROPERTIES_ADDED" if u_permits else "ADDITIONAL_PROPERTIES_REMOVED"
                )
            elif o_schema is None and u_schema is not None:
                self.add("ADDITIONAL_PROPERTIES_NARROWED")
            elif u_schema is None and o_schema is not None:
                self.add("ADDITIONAL_PROPERTIES_EXTENDED")
            elif o_schema is not None:
                self.compare(o_schema, u_schema)

    def _array(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        self._bounds(original, update, "maxItems", "MAX_ITEMS")
        self._bounds(original, update, "minItems", "MIN_ITEMS")
        o_unique = original.get("uniqueItems") is True
        u_unique = update.get("uniqueItems") is True
        if o_unique != u_unique:
            self.add("UNIQUE_ITEMS_ADDED" if u_unique else "UNIQUE_ITEMS_REMOVED", "uniqueItems")
        o_items, u_items = original.get("items"), update.get("items")
        if isinstance(o_items, list) or isinstance(u_items, list):
            self._tuple_items(original, update)
        elif o_items is None and u_items is not None:
            with self.at("items"):
                self.add("SCHEMA_ADDED")
        elif u_items is None and o_items is not None:
            with self.at("items"):
                self.add("SCHEMA_REMOVED")
        elif o_items is not None:
            with self.at("items"):
                self.compare(o_items, u_items)

    def _tuple_items(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_items = _as_list(original.get("items"))
        u_items = _as_list(update.get("items"))
        with self.at("items"):
            for i in range(max(len(o_items), len(u_items))):
                with self.at(str(i)):
                    if i >= len(u_items):
                        if update.get("additionalItems", True) is not False:
                            self.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
                        else:
                            self.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
                    elif i >= len(o_items):
                        if original.get("additionalItems", True) is not False:
                            empty = _kind(u_items[i]) == "empty"
                            self.add(
                                "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                                if empty
                                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
                            )
                        else:
                            self.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
                    else:
                        self.compare(o_items[i], u_items[i])


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _additional_schema(schema: dict[str, Any]) -> Any:
    """The schema of additional properties, ``None`` for absent, ``true`` or ``false``."""
    value = schema.get("additionalProperties")
    return value if isinstance(value, dict) else None


def _is_open(schema: dict[str, Any]) -> bool:
    """No ``patternProperties``, and ``additionalProperties`` absent or ``true``."""
    return not _mapping(schema.get("patternProperties")) and (
        schema.get("additionalProperties", True) is True
    )


def _partial_schema(schema: dict[str, Any], name: str) -> Any:
    """The schema a partly open content model gives property ``name``, or ``None``."""
    for pattern, sub in _mapping(schema.get("patternProperties")).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:  # an ECMA-262 pattern Python does not read: not a match
            continue
    return _additional_schema(schema)
