"""Confluent's compatibility rules for JSON Schema: the differences between two schemas.

:func:`diff` walks an *original* schema (the one data was written with) and an *update* (the
one that reads it) side by side and returns every
:class:`~sluice.schemas.json_schema_difference.Difference`, following Confluent's
``json-schema-provider`` ``diff`` package (``SchemaDiff.compareTypes`` and the per-type diffs):

* Each schema is first seen as Confluent's parser (everit) builds it: ``true``/``{}`` is the
  empty schema, ``false`` the false one; a ``type`` list of several types is an ``anyOf`` of
  one schema per type; a schema that mixes groups of keywords (a ``type`` with an ``enum``, or
  with an ``allOf``) is an ``allOf`` of one schema per group; a local ``$ref`` is followed.
  Two schemas of different kinds are ``TYPE_CHANGED`` unless the original is ``false`` or the
  update is empty (which read anything) — or the update is a sum type one of whose branches
  reads the original (``SUM_TYPE_EXTENDED``), or the original a product type one of whose
  branches the update reads (``PRODUCT_TYPE_NARROWED``).
* Objects: an *open content model* (``additionalProperties`` absent or ``true``, no
  ``patternProperties``) may lose properties but gains one only with an empty schema
  (``OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL`` is incompatible: old data may hold
  anything under that name); a closed one gains optional properties but loses none
  (``PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL``); a partly open one checks the property
  against the schema its patterns or ``additionalProperties`` give it; a property newly
  required needs a default (``REQUIRED_ATTRIBUTE_ADDED``). Arrays: the same for tuple items
  and ``additionalItems``.
* Bounds added or tightened are incompatible (``MAX_LENGTH_ADDED``, ``MINIMUM_INCREASED``…),
  removed or loosened compatible; ``integer`` → ``number`` is ``TYPE_EXTENDED``, the reverse
  ``TYPE_NARROWED``; enums may grow (``ENUM_ARRAY_EXTENDED``).
* Combined types: the criterion may widen (to ``anyOf``; ``COMBINED_TYPE_EXTENDED``), a sum
  may grow and a product shrink, and the branches must pair up — a maximum matching of
  original to update branches that read each other — or ``COMBINED_TYPE_SUBSCHEMAS_CHANGED``.

Checked against Confluent's draft-07 diff examples (the 103 cases of
``diff-schema-examples.json`` that carry no metadata, and the 28 of
``diff-combined-schema-examples.json``): the same differences, the same verdicts. Not
covered: ``unevaluated*``, ``contains``, ``dependentSchemas``/``dependentRequired``, remote
``$ref`` (kept unresolved: compared as written).

Bounds: a ``$ref`` cycle is gone round once per walk; documents are at most
``MAX_SAFE_DEPTH`` deep; a walk of more than :data:`MAX_STEPS` comparisons raises 42201.
Pure functions over decoded JSON; thread-safe.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.json_schema_difference import Difference

# Comparing two schemas takes a step per pair of subschemas walked. Combined types compare
# every branch of one side with every branch of the other, so branches nested in branches
# multiply the steps; this bound keeps a hostile pair to about a second of the registry's lock.
MAX_STEPS = 200_000

_META = ("$id", "id", "title", "description", "default")
_CRITERIA = ("allOf", "anyOf", "oneOf")
_GROUPED = frozenset(("enum", "const", "not", *_CRITERIA))
_IGNORED = frozenset(("$schema", "definitions", "$defs", "$comment", "examples", *_META))
_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties")
    + ("minProperties", "maxProperties", "dependencies", "propertyNames"),
    "array": ("items", "additionalItems", "minItems", "maxItems", "uniqueItems", "contains"),
    "string": ("minLength", "maxLength", "pattern", "format"),
    "number": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
}
_BY_TYPE = {"object": "object", "array": "array", "string": "string", "number": "number"}
_BY_TYPE |= {"integer": "number", "boolean": "boolean", "null": "null"}


def diff(original: Any, update: Any) -> list[Difference]:
    """Every difference from ``original`` (writer) to ``update`` (reader), in walk order."""
    walk = _Walk(original, update)
    walk.compare(original, update)
    return walk.found


def _view(schema: Any) -> Any:
    """``schema`` as everit builds it (see the module docstring): ``True`` for the empty
    schema, ``False``, or a dict of one group of keywords (with the metadata)."""
    if schema is False:
        return False
    if not isinstance(schema, dict):
        return True
    meta = {k: schema[k] for k in _META if k in schema}
    base = {k: v for k, v in schema.items() if k not in _GROUPED and k not in _IGNORED}
    parts: list[dict[str, Any]] = []
    types = base.get("type")
    if isinstance(types, list) and len(types) == 1:
        base["type"] = types[0]
    elif isinstance(types, list):
        rest = {k: v for k, v in base.items() if k != "type"}
        parts.append({"anyOf": [{**rest, "type": t} for t in types]})
    if not parts and _base_kind(base) != "empty":
        parts.append(base)
    parts += [{k: schema[k]} for k in ("enum", "const", *_CRITERIA, "not") if k in schema]
    if not parts:
        return meta or True
    if len(parts) == 1:
        return {**parts[0], **meta}
    return {"allOf": parts, **meta}


def _base_kind(schema: dict[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, str):
        return _BY_TYPE.get(declared, "empty")
    for kind, keys in _KEYWORDS.items():
        if any(k in schema for k in keys):
            return kind
    return "empty"


def _kind(view: Any) -> str:
    if view is False:
        return "false"
    if view is True:
        return "empty"
    for key, kind in (("enum", "enum"), ("const", "const"), ("not", "not")):
        if key in view:
            return kind
    if any(c in view for c in _CRITERIA):
        return "combined"
    return _base_kind(view)


def _branches(view: dict[str, Any]) -> tuple[str, list[Any]]:
    for criterion in _CRITERIA:
        if criterion in view:
            value = view[criterion]
            return criterion, list(value) if isinstance(value, list) else []
    return "allOf", []


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


@dataclass
class _Walk:
    original_root: Any
    update_root: Any
    found: list[Difference] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    entered: set[tuple[int, int]] = field(default_factory=set)  # pairs being compared, by id
    steps: list[int] = field(default_factory=lambda: [0])  # compare() calls, shared by sub-walks
    # Views by the id of the schema they show, kept with it: a view's parts must be the same
    # objects each time the walk comes back, or the cycle guard (by id) would not see a cycle
    # that runs through them. Shared by sub-walks.
    views: dict[int, tuple[Any, Any]] = field(default_factory=dict)

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

    def sub(self, original: Any, update: Any) -> tuple[bool, list[Difference]]:
        """Compare in a sub-walk at the current path: whether compatible, and what it found."""
        walk = _Walk(self.original_root, self.update_root)
        walk.path = list(self.path)
        walk.entered = set(self.entered)
        walk.steps = self.steps
        walk.views = self.views
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
        if original is None or update is None:
            if original is not None:
                self.add("SCHEMA_REMOVED")
            elif update is not None:
                self.add("SCHEMA_ADDED")
            return
        original = self._resolve(original, self.original_root)
        update = self._resolve(update, self.update_root)
        # A pair already being compared further up (a $ref back to an enclosing schema) adds
        # nothing new: the walk goes round the cycle once.
        pair = (id(original), id(update))
        if pair in self.entered:
            return
        self.entered.add(pair)
        try:
            self._compare_types(self._view(original), self._view(update))
        finally:
            self.entered.discard(pair)

    def _view(self, schema: Any) -> Any:
        cached = self.views.get(id(schema))
        if cached is None:
            cached = self.views[id(schema)] = (schema, _view(schema))
            self.views.setdefault(id(cached[1]), (cached[1], cached[1]))  # a view shows itself
        return cached[1]

    def _compare_types(self, original: Any, update: Any) -> None:
        o_kind, u_kind = _kind(original), _kind(update)
        if o_kind != "combined" and u_kind == "combined":
            criterion, branches = _branches(update)
            if len(branches) == 1 or criterion in ("anyOf", "oneOf"):
                for branch in branches:
                    ok, found = self.sub(original, branch)
                    if ok:
                        self.found += found
                        if len(branches) > 1:
                            self.add("SUM_TYPE_EXTENDED")
                        return
        elif o_kind == "combined" and u_kind != "combined":
            criterion, branches = _branches(original)
            if len(branches) == 1 or criterion == "allOf":
                for branch in branches:
                    ok, found = self.sub(branch, update)
                    if ok:
                        self.found += found
                        if len(branches) > 1:
                            self.add("PRODUCT_TYPE_NARROWED")
                        return
        if o_kind != u_kind:
            if o_kind != "false" and u_kind != "empty":
                self.add("TYPE_CHANGED")
            return
        if not isinstance(original, dict) or not isinstance(update, dict):
            return
        for key, name in (
            (("$id", "id"), "ID_CHANGED"),
            (("title",), "TITLE_CHANGED"),
            (("description",), "DESCRIPTION_CHANGED"),
            (("default",), "DEFAULT_CHANGED"),
        ):
            if [original.get(k) for k in key] != [update.get(k) for k in key]:
                self.add(name)
        compare = {
            "string": self._string,
            "number": self._number,
            "const": self._const,
            "enum": self._enum,
            "combined": self._combined,
            "not": self._not,
            "object": self._object,
            "array": self._array,
        }.get(o_kind)
        if compare is not None:
            compare(original, update)

    def _bounds(
        self, original: dict[str, Any], update: dict[str, Any], key: str, prefix: str
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

    def _string(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        self._bounds(original, update, "maxLength", "MAX_LENGTH")
        self._bounds(original, update, "minLength", "MIN_LENGTH")
        old, new = original.get("pattern"), update.get("pattern")
        if old != new:
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
            elif isinstance(old, int | float) and isinstance(new, int | float) and old and new:
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

    def _const(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        if _canonical(original["const"]) != _canonical(update["const"]):
            self.add("ENUM_ARRAY_CHANGED", "const")

    def _enum(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        old, new = original.get("enum"), update.get("enum")
        old_set = {_canonical(v) for v in old} if isinstance(old, list) else set()
        new_set = {_canonical(v) for v in new} if isinstance(new, list) else set()
        if old_set == new_set:
            return
        if new_set >= old_set:
            self.add("ENUM_ARRAY_EXTENDED", "enum")
        elif old_set >= new_set:
            self.add("ENUM_ARRAY_NARROWED", "enum")
        else:
            self.add("ENUM_ARRAY_CHANGED", "enum")

    def _not(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        with self.at("not"):
            # What the update must not match may shrink: the wrapped schemas swap roles.
            ok, _ = self.sub(update["not"], original["not"])
            self.add("NOT_TYPE_NARROWED" if ok else "NOT_TYPE_EXTENDED")

    def _combined(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_criterion, o_listed = _branches(original)
        u_criterion, u_listed = _branches(update)
        if o_criterion != u_criterion:
            widened = (
                u_criterion == "anyOf"
                or (len(o_listed) == 1 and len(u_listed) == 1)
                or (len(o_listed) == 1 and u_criterion == "oneOf")
                or (len(u_listed) == 1 and o_criterion == "allOf")
            )
            self.add("COMBINED_TYPE_EXTENDED" if widened else "COMBINED_TYPE_CHANGED")
            if not widened:
                return
        # Duplicate branches count once, as in Confluent (it collects them in sets).
        o_branches = list({_canonical(b): b for b in o_listed}.values())
        u_branches = list({_canonical(b): b for b in u_listed}.values())
        if len(o_branches) < len(u_branches):
            product = u_criterion == "allOf"
            self.add("PRODUCT_TYPE_EXTENDED" if product else "SUM_TYPE_EXTENDED")
        elif len(o_branches) > len(u_branches):
            product = o_criterion == "allOf"
            self.add("PRODUCT_TYPE_NARROWED" if product else "SUM_TYPE_NARROWED")
        edges: dict[tuple[int, int], list[Difference]] = {}
        for i, o_branch in enumerate(o_branches):
            with self.at(f"{o_criterion}/{i}"):
                for j, u_branch in enumerate(u_branches):
                    ok, found = self.sub(o_branch, u_branch)
                    if ok:
                        edges[(i, j)] = found
        matching = _maximum_matching(len(o_branches), len(u_branches), set(edges))
        for i, j in sorted(matching.items()):
            self.found += edges[(i, j)]
        if len(matching) < min(len(o_branches), len(u_branches)):
            self.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")

    def _object(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_props = _mapping(original.get("properties"))
        u_props = _mapping(update.get("properties"))
        u_required = set(_strings(update.get("required")))
        o_required = set(_strings(original.get("required")))
        with self.at("required"):
            for name in o_props:
                if name in u_props and (name in o_required) != (name in u_required):
                    with self.at(name):
                        if name in o_required:
                            self.add("REQUIRED_ATTRIBUTE_REMOVED")
                        elif _has_default(u_props[name]):
                            self.add("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED")
                        else:
                            self.add("REQUIRED_ATTRIBUTE_ADDED")
        with self.at("properties"):
            for name in list(o_props) + [n for n in u_props if n not in o_props]:
                with self.at(name):
                    if name not in u_props:
                        self._property_removed(o_props[name], update, name)
                    elif name not in o_props:
                        self._property_added(u_props[name], original, name, name in u_required)
                    else:
                        self.compare(o_props[name], u_props[name])
        self._dependencies(original, update)
        with self.at("additionalProperties"):
            self._additional(original, update, "additionalProperties", "ADDITIONAL_PROPERTIES")
        self._bounds(original, update, "maxProperties", "MAX_PROPERTIES")
        self._bounds(original, update, "minProperties", "MIN_PROPERTIES")

    def _property_removed(self, schema: Any, update: dict[str, Any], name: str) -> None:
        # Only the update's content model matters: it must read what old data held there.
        if _is_open(update, "additionalProperties", "patternProperties"):
            self.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _partial_schema(update, "additionalProperties", name)
        if partial is not None:
            ok, found = self.sub(schema, partial)
            self.found += found
            covered = "IS_COVERED" if ok else "NOT_COVERED"
            self.add(f"PROPERTY_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif schema is False:
            self.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            self.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")

    def _property_added(
        self, schema: Any, original: dict[str, Any], name: str, required: bool
    ) -> None:
        # Only the original's content model matters: old data may hold anything it allowed.
        with_default = _has_default(schema)
        if _is_open(original, "additionalProperties", "patternProperties"):
            if _kind(_view(schema)) == "empty":
                self.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
            elif required:
                default = "_WITH_DEFAULT" if with_default else ""
                self.add(f"REQUIRED_PROPERTY{default}_ADDED_TO_OPEN_CONTENT_MODEL")
            else:
                self.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
            return
        partial = _partial_schema(original, "additionalProperties", name)
        if partial is not None:
            ok, found = self.sub(partial, schema)
            self.found += found
            covered = "IS_COVERED" if ok else "NOT_COVERED"
            self.add(f"PROPERTY_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        if required:
            default = "_WITH_DEFAULT" if with_default else ""
            self.add(f"REQUIRED_PROPERTY{default}_ADDED_TO_UNOPEN_CONTENT_MODEL")
        else:
            self.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")

    def _dependencies(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_deps = _mapping(original.get("dependencies"))
        u_deps = _mapping(update.get("dependencies"))
        with self.at("dependencies"):
            for as_array in (True, False):
                o_part = {k: v for k, v in o_deps.items() if isinstance(v, list) == as_array}
                u_part = {k: v for k, v in u_deps.items() if isinstance(v, list) == as_array}
                kind = "ARRAY" if as_array else "SCHEMA"
                for name in sorted(o_part.keys() | u_part.keys()):
                    with self.at(name):
                        if name not in u_part:
                            self.add(f"DEPENDENCY_{kind}_REMOVED")
                        elif name not in o_part:
                            self.add(f"DEPENDENCY_{kind}_ADDED")
                        elif as_array:
                            self._dependency_array(o_part[name], u_part[name])
                        else:
                            self.compare(o_part[name], u_part[name])

    def _dependency_array(self, original: list[Any], update: list[Any]) -> None:
        old, new = set(_strings(original)), set(_strings(update))
        if old != new:
            if new >= old:
                self.add("DEPENDENCY_ARRAY_EXTENDED")
            elif old >= new:
                self.add("DEPENDENCY_ARRAY_NARROWED")
            else:
                self.add("DEPENDENCY_ARRAY_CHANGED")

    def _additional(
        self, original: dict[str, Any], update: dict[str, Any], key: str, prefix: str
    ) -> None:
        """``additionalProperties`` or ``additionalItems``: allowed or not, and their schema."""
        o_permits = original.get(key, True) is not False
        u_permits = update.get(key, True) is not False
        o_schema, u_schema = _additional_schema(original, key), _additional_schema(update, key)
        if o_permits != u_permits:
            self.add(f"{prefix}_ADDED" if u_permits else f"{prefix}_REMOVED")
        elif o_schema is None and u_schema is not None:
            self.add(f"{prefix}_NARROWED")
        elif u_schema is None and o_schema is not None:
            self.add(f"{prefix}_EXTENDED")
        elif o_schema is not None:
            self.compare(o_schema, u_schema)

    def _array(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_items, u_items = original.get("items"), update.get("items")
        with self.at("items"):
            self.compare(
                None if isinstance(o_items, list) else o_items,
                None if isinstance(u_items, list) else u_items,
            )
        self._tuple_items(original, update)
        with self.at("additionalItems"):
            self._additional(original, update, "additionalItems", "ADDITIONAL_ITEMS")
        self._bounds(original, update, "maxItems", "MAX_ITEMS")
        self._bounds(original, update, "minItems", "MIN_ITEMS")
        o_unique = original.get("uniqueItems") is True
        u_unique = update.get("uniqueItems") is True
        if o_unique != u_unique:
            self.add("UNIQUE_ITEMS_REMOVED" if o_unique else "UNIQUE_ITEMS_ADDED", "uniqueItems")

    def _tuple_items(self, original: dict[str, Any], update: dict[str, Any]) -> None:
        o_items = _as_list(original.get("items"))
        u_items = _as_list(update.get("items"))
        for i in range(max(len(o_items), len(u_items))):
            with self.at(f"items/{i}"):
                if i < len(o_items) and i < len(u_items):
                    self.compare(o_items[i], u_items[i])
                elif i < len(o_items):
                    self._item_removed(o_items[i], update)
                else:
                    self._item_added(u_items[i], original)

    def _item_removed(self, schema: Any, update: dict[str, Any]) -> None:
        if _is_open(update, "additionalItems"):
            self.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
            return
        partial = _additional_schema(update, "additionalItems")
        if partial is not None:
            ok, found = self.sub(schema, partial)
            self.found += found
            covered = "IS_COVERED" if ok else "NOT_COVERED"
            self.add(f"ITEM_REMOVED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        elif schema is False:
            self.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
        else:
            self.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")

    def _item_added(self, schema: Any, original: dict[str, Any]) -> None:
        if _is_open(original, "additionalItems"):
            empty = _kind(_view(schema)) == "empty"
            self.add(
                "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL"
                if empty
                else "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
            )
            return
        partial = _additional_schema(original, "additionalItems")
        if partial is not None:
            ok, found = self.sub(partial, schema)
            self.found += found
            covered = "IS_COVERED" if ok else "NOT_COVERED"
            self.add(f"ITEM_ADDED_{covered}_BY_PARTIALLY_OPEN_CONTENT_MODEL")
        else:
            self.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")


def _maximum_matching(left: int, right: int, edges: set[tuple[int, int]]) -> dict[int, int]:
    """A maximum matching of a bipartite graph (left → right), by augmenting paths (Kuhn)."""
    match_of_right: dict[int, int] = {}

    def augment(i: int, seen: set[int]) -> bool:
        for j in range(right):
            if (i, j) in edges and j not in seen:
                seen.add(j)
                if j not in match_of_right or augment(match_of_right[j], seen):
                    match_of_right[j] = i
                    return True
        return False

    for i in range(left):
        augment(i, set())
    return {i: j for j, i in match_of_right.items()}


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _has_default(schema: Any) -> bool:
    return isinstance(schema, dict) and "default" in schema


def _additional_schema(schema: dict[str, Any], key: str) -> Any:
    """The schema of additional properties or items: ``None`` for absent, ``true``, ``false``."""
    value = schema.get(key)
    return value if isinstance(value, dict) else None


def _is_open(schema: dict[str, Any], key: str, patterns: str | None = None) -> bool:
    """``key`` absent or ``true``, and no ``patterns`` (``patternProperties``)."""
    if patterns is not None and _mapping(schema.get(patterns)):
        return False
    return schema.get(key, True) is True


def _partial_schema(schema: dict[str, Any], key: str, name: str) -> Any:
    """The schema a partly open content model gives property ``name``, or ``None``."""
    for pattern, sub in _mapping(schema.get("patternProperties")).items():
        try:
            if re.search(pattern, name):
                return sub
        except re.error:  # an ECMA-262 pattern Python does not read: not a match
            continue
    return _additional_schema(schema, key)
