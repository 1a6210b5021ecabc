"""Confluent's compatibility rules for Protobuf: the differences between two ``.proto`` files.

:func:`diff` compares an *original* file (the one data was written with) with an *update* (the
one that reads it), both ``FileDescriptorProto``, and returns every :class:`Difference` with
Confluent's ``Difference.Type`` name and path (``#/Order/2``: message names, then a field
number or a oneof name), as Confluent's ``protobuf-provider`` ``diff`` package does:

* messages are matched by name, fields by number. Removing a field, adding one, renaming one
  (the number is what goes on the wire), adding or removing a oneof, a message or an enum
  constant are compatible; removing a message (``MESSAGE_REMOVED``), adding a ``required``
  field, changing a field's kind (scalar / message / map: ``FIELD_KIND_CHANGED``), its scalar
  kind across wire-compatible groups (``FIELD_SCALAR_KIND_CHANGED``: ``int32``, ``int64``,
  ``uint32``, ``uint64``, ``bool`` and enums are one group; ``sint32``/``sint64``;
  ``string``/``bytes``; ``fixed32``/``sfixed32``; ``fixed64``/``sfixed64``; ``float``;
  ``double``), its message type (``FIELD_NAMED_TYPE_CHANGED``), moving several existing
  fields into one oneof (``MULTIPLE_FIELDS_MOVED_TO_ONEOF``) or one into an existing oneof
  (``FIELD_MOVED_TO_EXISTING_ONEOF``) are not; nor is turning a numeric field ``repeated``
  or back when both labels are written (``FIELD_NUMERIC_LABEL_CHANGED``; packed and unpacked
  encodings differ), while a ``string``/``bytes`` one may (the wire form is the same).
* fields are compared by number across the whole message, whichever oneof holds them, so a
  oneof renamed, a field moved in or out (``ONEOF_FIELD_MOVED_TO_TOP_LEVEL``, compatible) or
  two oneofs merged cannot hide a type change or a removal; a member dropped from a oneof
  that survives under some name is ``ONEOF_FIELD_REMOVED``, a oneof deleted whole is not.
* a field whose message type has the same name in both files compares that message too; a
  recursive message is entered once per walk.

Checked against the 46 cases of Confluent's ``protobuf-provider`` diff examples that need no
import and no metadata: the same differences, the same verdicts. Messages are Confluent's current
``{errorType:"…", description:"…"}`` wording.

Descriptors name types fully (``.pkg.Outer.Inner``), so a name is resolved by looking it up;
types from imports (the well-known types) are compared by name only. A proto3 ``optional``
field sits in a synthetic oneof that is not a oneof for these rules.

Pure functions over descriptors; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from google.protobuf.descriptor_pb2 import (
    DescriptorProto,
    EnumDescriptorProto,
    FieldDescriptorProto,
    FileDescriptorProto,
)

COMPATIBLE_CHANGES = frozenset(
    [
        "MESSAGE_ADDED",
        "MESSAGE_MOVED",
        "ENUM_ADDED",
        "ENUM_REMOVED",
        "ENUM_CONST_ADDED",
        "ENUM_CONST_CHANGED",
        "ENUM_CONST_REMOVED",
        "FIELD_ADDED",
        "FIELD_REMOVED",
        "FIELD_NAME_CHANGED",
        "FIELD_STRING_OR_BYTES_LABEL_CHANGED",
        "ONEOF_ADDED",
        "ONEOF_REMOVED",
        "ONEOF_FIELD_ADDED",
        "ONEOF_FIELD_MOVED_TO_TOP_LEVEL",
    ]
)

# Confluent's wording (its Difference.error()): the first role is the update's (the reader).
_WORDING = {
    "PACKAGE_CHANGED": "The package at '{path}' in the {update} schema does not match the package in the {original} schema",  # noqa: E501
    "MESSAGE_REMOVED": "The {update} schema is missing a MESSAGE type at path '{path}' in the {original} schema",  # noqa: E501
    "FIELD_KIND_CHANGED": "The type of a field at path '{path}' in the {update} schema does not match the {original} schema",  # noqa: E501
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{path}' in the {update} schema does not match its kind in the {original} schema",  # noqa: E501
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{path}' in the {update} schema does not match its type in the {original} schema",  # noqa: E501
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{path}' in the {update} schema does not match its label in the {original} schema",  # noqa: E501
    "REQUIRED_FIELD_ADDED": "A required field  at path '{path}' in the {update} schema is missing in the {original} schema",  # noqa: E501
    "REQUIRED_FIELD_REMOVED": "The {update} schema is missing a required field at path: '{path}' in the {original} schema",  # noqa: E501
    "ONEOF_FIELD_REMOVED": "The {update} schema is missing a oneof field at path '{path}' in the {original} schema",  # noqa: E501
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{path}' in the {update} schema was moved out of its oneof to a top-level field in the {original} schema",  # noqa: E501
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{path}' in the {update} schema are outside a oneof in the {original} schema",  # noqa: E501
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{path}' in the {update} schema is outside an existing oneof in the {original} schema",  # noqa: E501
}

_T = FieldDescriptorProto
_SCALAR_KIND = {
    **dict.fromkeys(
        (_T.TYPE_INT32, _T.TYPE_INT64, _T.TYPE_UINT32, _T.TYPE_UINT64, _T.TYPE_BOOL, _T.TYPE_ENUM),
        "GENERAL_NUMBER",
    ),
    **dict.fromkeys((_T.TYPE_SINT32, _T.TYPE_SINT64), "SIGNED_NUMBER"),
    **dict.fromkeys((_T.TYPE_STRING, _T.TYPE_BYTES), "STRING_OR_BYTES"),
    **dict.fromkeys((_T.TYPE_FIXED32, _T.TYPE_SFIXED32), "FIXED32"),
    **dict.fromkeys((_T.TYPE_FIXED64, _T.TYPE_SFIXED64), "FIXED64"),
    _T.TYPE_FLOAT: "FLOAT",
    _T.TYPE_DOUBLE: "DOUBLE",
}


@dataclass(frozen=True)
class Difference:
    """One difference: Confluent's type name and the path where it was found."""

    type: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.type in COMPATIBLE_CHANGES

    def message(self, *, update_role: str, original_role: str) -> str:
        """Confluent's ``{errorType:"…", description:"…"}`` for this difference (its
        ``Difference.toString()``, roles filled in as its ``SchemaValidatorBuilder`` does)."""
        wording = _WORDING.get(self.type, "")
        description = wording.format(path=self.path, update=update_role, original=original_role)
        return f'{{errorType:"{self.type}", description:"{description}"}}'


def diff(original: FileDescriptorProto, update: FileDescriptorProto) -> list[Difference]:
    """Every difference from ``original`` (writer) to ``update`` (reader), in walk order."""
    walk = _Walk(_Types.of(original), _Types.of(update))
    if original.package != update.package:
        walk.add("PACKAGE_CHANGED")
    walk.compare_types(
        list(original.message_type),
        list(original.enum_type),
        list(update.message_type),
        list(update.enum_type),
    )
    return walk.found


@dataclass
class _Types:
    """Every message and enum a file declares, by full name without the leading dot."""

    package: str
    proto3: bool
    messages: dict[str, DescriptorProto]
    enums: dict[str, EnumDescriptorProto]

    @classmethod
    def of(cls, file: FileDescriptorProto) -> _Types:
        types = cls(file.package, file.syntax == "proto3", {}, {})
        prefix = f"{file.package}." if file.package else ""
        types._collect(prefix, list(file.message_type), list(file.enum_type))
        return types

    def _collect(
        self, prefix: str, messages: list[DescriptorProto], enums: list[EnumDescriptorProto]
    ) -> None:
        for enum in enums:
            self.enums[prefix + enum.name] = enum
        for message in messages:
            name = prefix + message.name
            self.messages[name] = message
            self._collect(name + ".", list(message.nested_type), list(message.enum_type))

    def local(self, type_name: str) -> str:
        """``.pkg.Outer.Inner`` → ``Outer.Inner`` (the name without this file's package)."""
        name = type_name.lstrip(".")
        prefix = f"{self.package}." if self.package else ""
        return name[len(prefix) :] if prefix and name.startswith(prefix) else name

    def label(self, f: FieldDescriptorProto) -> int | None:
        """The label as written: ``None`` for a proto3 field written without one (Confluent's
        parser has no label there, and compares labels only when both fields have one)."""
        if self.proto3 and f.label == _T.LABEL_OPTIONAL and not f.proto3_optional:
            return None
        return f.label

    def is_map(self, type_name: str) -> bool:
        message = self.messages.get(type_name.lstrip("."))
        return message is not None and message.options.map_entry


def _real_oneof(f: FieldDescriptorProto) -> bool:
    return f.HasField("oneof_index") and not f.proto3_optional


@dataclass
class _Walk:
    original: _Types
    update: _Types
    found: list[Difference] = field(default_factory=list)
    seen: set[Difference] = field(default_factory=set)  # the elements of found
    path: list[str] = field(default_factory=list)
    entered: set[str] = field(default_factory=set)  # message types being compared, by name
    # What comparing two message types found, by (original, update) full name. The paths of a
    # type's differences do not depend on the field that led there, so a result is reused:
    # without it, ten fields of one type whose fields are ten of the next make 10^depth
    # comparisons out of a schema of a few hundred bytes.
    memo: dict[tuple[str, str], list[Difference]] = field(default_factory=dict)

    def add(self, kind: str) -> None:
        self.extend([Difference(kind, "#/" + "/".join(self.path))])

    def extend(self, found: list[Difference]) -> None:
        """Add ``found``, less what was found already: a message type reached through several
        fields reports its differences once (Confluent repeats them once per field)."""
        for difference in found:
            if difference not in self.seen:
                self.seen.add(difference)
                self.found.append(difference)

    @contextmanager
    def at(self, part: str) -> Iterator[None]:
        self.path.append(part)
        try:
            yield
        finally:
            self.path.pop()

    def compare_types(
        self,
        o_messages: list[DescriptorProto],
        o_enums: list[EnumDescriptorProto],
        u_messages: list[DescriptorProto],
        u_enums: list[EnumDescriptorProto],
    ) -> None:
        o_by_name = {m.name: (i, m) for i, m in enumerate(o_messages)}
        u_by_name = {m.name: (i, m) for i, m in enumerate(u_messages)}
        for name in list(o_by_name) + [n for n in u_by_name if n not in o_by_name]:
            with self.at(name):
                if name not in u_by_name:
                    if not o_by_name[name][1].options.map_entry:
                        self.add("MESSAGE_REMOVED")
                elif name not in o_by_name:
                    if not u_by_name[name][1].options.map_entry:
                        self.add("MESSAGE_ADDED")
                else:
                    self.compare_message(o_by_name[name][1], u_by_name[name][1])
                    if o_by_name[name][0] != u_by_name[name][0]:
                        self.add("MESSAGE_MOVED")
        o_enum_names = {e.name: e for e in o_enums}
        u_enum_names = {e.name: e for e in u_enums}
        for name in list(o_enum_names) + [n for n in u_enum_names if n not in o_enum_names]:
            with self.at(name):
                if name not in u_enum_names:
                    self.add("ENUM_REMOVED")
                elif name not in o_enum_names:
                    self.add("ENUM_ADDED")
                else:
                    self._compare_enum(o_enum_names[name], u_enum_names[name])

    def _compare_enum(self, original: EnumDescriptorProto, update: EnumDescriptorProto) -> None:
        o_values = {v.number: v.name for v in original.value}
        u_values = {v.number: v.name for v in update.value}
        for number in sorted(o_values.keys() | u_values.keys()):
            with self.at(str(number)):
                if number not in u_values:
                    self.add("ENUM_CONST_REMOVED")
                elif number not in o_values:
                    self.add("ENUM_CONST_ADDED")
                elif o_values[number] != u_values[number]:
                    self.add("ENUM_CONST_CHANGED")

    def compare_message(self, original: DescriptorProto, update: DescriptorProto) -> None:
        self._compare_fields(original, update)
        self.compare_types(
            list(original.nested_type),
            list(original.enum_type),
            list(update.nested_type),
            list(update.enum_type),
        )

    def _compare_fields(self, original: DescriptorProto, update: DescriptorProto) -> None:
        """Every field by number across the message, whatever oneof holds it, so a change of
        membership (a oneof renamed, a field moved in or out, two merged) cannot hide a change
        of type or a removal; then the oneofs: new mutual exclusivity is incompatible."""
        o_fields = {f.number: f for f in original.field}
        u_fields = {f.number: f for f in update.field}
        o_oneof = {
            f.number: original.oneof_decl[f.oneof_index].name
            for f in original.field
            if _real_oneof(f)
        }
        u_oneof = {
            f.number: update.oneof_decl[f.oneof_index].name for f in update.field if _real_oneof(f)
        }
        o_names, u_names = set(o_oneof.values()), set(u_oneof.values())
        # A oneof gone by name with none of its members left anywhere was deleted whole, which
        # is compatible; members of a oneof some of whose members survive are removals.
        deleted_whole = {
            name
            for name in o_names - u_names
            if not any(n in u_fields for n, of in o_oneof.items() if of == name)
        }
        for name in sorted(u_names):
            with self.at(name):
                groups: set[str] = set()
                moved_in = 0
                for number, of in u_oneof.items():
                    if of != name:
                        continue
                    if number in o_oneof:
                        groups.add("oneof:" + o_oneof[number])
                    elif number in o_fields:
                        groups.add(f"field:{number}")
                        moved_in += 1
                if len(groups) > 1:
                    self.add(
                        "MULTIPLE_FIELDS_MOVED_TO_ONEOF"
                        if moved_in > 1
                        else "FIELD_MOVED_TO_EXISTING_ONEOF"
                    )
        for name in sorted(o_names | u_names):
            with self.at(name):
                if name not in u_names:
                    self.add("ONEOF_REMOVED")
                elif name not in o_names:
                    self.add("ONEOF_ADDED")
        for number in sorted(o_fields.keys() | u_fields.keys()):
            self._compare_number(number, o_fields, u_fields, o_oneof, u_oneof, deleted_whole)

    def _compare_number(
        self,
        number: int,
        o_fields: dict[int, FieldDescriptorProto],
        u_fields: dict[int, FieldDescriptorProto],
        o_oneof: dict[int, str],
        u_oneof: dict[int, str],
        deleted_whole: set[str],
    ) -> None:
        o_field, u_field = o_fields.get(number), u_fields.get(number)
        o_name, u_name = o_oneof.get(number), u_oneof.get(number)
        if u_field is None:
            assert o_field is not None
            if o_name is not None:
                if o_name not in deleted_whole:
                    with self.at(o_name), self.at(str(number)):
                        self.add("ONEOF_FIELD_REMOVED")
                return
            with self.at(str(number)):
                required = o_field.label == _T.LABEL_REQUIRED
                self.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED")
        elif o_field is None:
            if u_name is not None:
                with self.at(u_name), self.at(str(number)):
                    self.add("ONEOF_FIELD_ADDED")
                return
            with self.at(str(number)):
                required = u_field.label == _T.LABEL_REQUIRED
                self.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED")
        else:
            if o_name is not None and u_name is None:
                with self.at(str(number)):
                    self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL")
            if u_name is not None:
                with self.at(u_name), self.at(str(number)):
                    self._compare_field(o_field, u_field)
            else:
                with self.at(str(number)):
                    self._compare_field(o_field, u_field)

    def _compare_field(self, original: FieldDescriptorProto, update: FieldDescriptorProto) -> None:
        if original.name != update.name:
            self.add("FIELD_NAME_CHANGED")
        labels = (self.original.label(original), self.update.label(update))
        self._compare_type(original, update, labels)

    def _kind(self, f: FieldDescriptorProto, types: _Types) -> str:
        if f.type == _T.TYPE_MESSAGE and types.is_map(f.type_name):
            return "MAP"
        if f.type in (_T.TYPE_MESSAGE, _T.TYPE_GROUP):
            return "MESSAGE"
        return "SCALAR"

    def _compare_type(
        self,
        original: FieldDescriptorProto,
        update: FieldDescriptorProto,
        labels: tuple[int | None, int | None],
    ) -> None:
        """Kinds, then scalar groups (and labels: ``repeated`` ↔ ``optional``), message types
        or map key and value types. ``labels`` are ``(None, None)`` for map entries."""
        o_kind, u_kind = self._kind(original, self.original), self._kind(update, self.update)
        if o_kind != u_kind:
            self.add("FIELD_KIND_CHANGED")
        elif o_kind == "SCALAR":
            group = _SCALAR_KIND.get(original.type)
            if group != _SCALAR_KIND.get(update.type):
                self.add("FIELD_SCALAR_KIND_CHANGED")
            elif None not in labels and labels[0] != labels[1]:
                bytes_like = group == "STRING_OR_BYTES"
                self.add(
                    "FIELD_STRING_OR_BYTES_LABEL_CHANGED"
                    if bytes_like
                    else "FIELD_NUMERIC_LABEL_CHANGED"
                )
        elif o_kind == "MAP":
            o_entry = self.original.messages[original.type_name.lstrip(".")]
            u_entry = self.update.messages[update.type_name.lstrip(".")]
            for o_part, u_part in zip(o_entry.field, u_entry.field, strict=False):
                self._compare_type(o_part, u_part, (None, None))
        else:
            self._compare_message_type(original.type_name, update.type_name)

    def _compare_message_type(self, original: str, update: str) -> None:
        if self.original.local(original) != self.update.local(update):
            self.add("FIELD_NAMED_TYPE_CHANGED")
            return
        o_message = self.original.messages.get(original.lstrip("."))
        u_message = self.update.messages.get(update.lstrip("."))
        if o_message is None or u_message is None:  # an imported type: compared by name
            return
        key = original.lstrip(".")
        if key in self.entered:  # a recursive type: already being compared further up
            return
        pair = (key, update.lstrip("."))
        found = self.memo.get(pair)
        if found is None:
            sub = _Walk(self.original, self.update, entered=self.entered, memo=self.memo)
            sub.path = self.original.local(original).split(".")
            self.entered.add(key)
            try:
                sub.compare_message(o_message, u_message)
            finally:
                self.entered.discard(key)
            found = self.memo[pair] = sub.found
        self.extend(found)
        if not all(d.compatible for d in found):
            self.add("FIELD_NAMED_TYPE_CHANGED")
