"""Printing a ``FileDescriptorProto`` as ``.proto`` text.

Why: a client may register a Protobuf schema as the base64 of a serialized
``FileDescriptorProto`` (confluent-kafka's ``ProtobufSerializer`` does). Confluent's registry
stores and serves the ``.proto`` text printed from the descriptor in that case
(``ProtobufSchema.canonicalString()``), so a person or a tool reading
``GET /schemas/ids/{id}`` sees a schema, not base64. This module is that printer.

Covered: ``syntax`` (proto2 — also a descriptor with no syntax, which is how protoc writes
proto2 — and proto3), ``package``, imports (``public``, ``weak``), file options, then messages
(nested messages and enums, fields with labels, proto3 ``optional`` — whose synthetic oneof is
not printed —, ``map<K, V>`` from map-entry nested types, proto2 groups, oneofs, explicit
defaults, ``json_name`` when it is not the default one, reserved ranges and names, extension
ranges, nested ``extend`` blocks), enums (values, ``allow_alias`` and other options, reserved),
top-level ``extend`` blocks and services (rpc methods, client and server streaming). Options are
printed from the options message's set fields, whatever they are: scalars as literals, enums by
name, messages in the aggregate ``{ ... }`` form. Declarations come in Confluent's order
(syntax, package, imports, options, messages, enums, extends, services), except that a nested
message declared before a map or group field stays before it: the nested types' order is the
message indexes'. Types are written fully qualified (``.pkg.Msg``) as the descriptor holds them,
so the text resolves to the same types wherever it is compiled.

Custom options (extensions of the ``*Options`` messages the schema or its imports define) are
printed as ``(.full.name) = value`` when the caller passes the pool the file was built in: a
descriptor holds them as unknown fields of its options, which that pool's options types read.

Editions files are printed with ``edition = "2023";`` and their ``features`` options as any
other option; labels are then implicit, as in proto3.

Not printed (:class:`UnprintableSchema` is raised, the caller keeps the base64): group
extensions, editions other than a numbered one. Whatever else this printer may get wrong, the
registry prints, compiles the text again and keeps it only when it yields the same normalized
descriptor (see ``protobuf_schema``), so a lossy print never becomes a schema's text.

Pure functions, no state: thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

_FDP = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    _FDP.TYPE_DOUBLE: "double",
    _FDP.TYPE_FLOAT: "float",
    _FDP.TYPE_INT64: "int64",
    _FDP.TYPE_UINT64: "uint64",
    _FDP.TYPE_INT32: "int32",
    _FDP.TYPE_FIXED64: "fixed64",
    _FDP.TYPE_FIXED32: "fixed32",
    _FDP.TYPE_BOOL: "bool",
    _FDP.TYPE_STRING: "string",
    _FDP.TYPE_BYTES: "bytes",
    _FDP.TYPE_UINT32: "uint32",
    _FDP.TYPE_SFIXED32: "sfixed32",
    _FDP.TYPE_SFIXED64: "sfixed64",
    _FDP.TYPE_SINT32: "sint32",
    _FDP.TYPE_SINT64: "sint64",
}
_LABELS = {_FDP.LABEL_OPTIONAL: "optional", _FDP.LABEL_REQUIRED: "required"}
_INDENT = "  "
_MAX_FIELD_NUMBER = 536_870_911
_MAX_ENUM_NUMBER = 2_147_483_647


class UnprintableSchema(ValueError):
    """The descriptor uses a feature this printer does not write (the message says which)."""


def print_proto(
    file: descriptor_pb2.FileDescriptorProto, pool: descriptor_pool.DescriptorPool | None = None
) -> str:
    """``file`` as ``.proto`` text; raise :class:`UnprintableSchema` if it cannot be."""
    if file.syntax == "editions":
        edition = descriptor_pb2.Edition.Name(file.edition)
        if not edition.removeprefix("EDITION_").isdigit():
            raise UnprintableSchema(f"edition '{edition}' is not printed")
        # Editions write no optional/required label (presence is a feature), as proto3 does.
        head = [f'edition = "{edition.removeprefix("EDITION_")}";']
        return _print(file, head, True, pool)
    if file.syntax not in ("", "proto2", "proto3"):
        raise UnprintableSchema(f"syntax '{file.syntax}' is not printed")
    # protoc writes no syntax for proto2 (the default): printed, it spares a reader protoc's
    # warning and compiles to the same descriptor.
    head = [f'syntax = "{file.syntax or "proto2"}";']
    return _print(file, head, file.syntax == "proto3", pool)


def _print(
    file: descriptor_pb2.FileDescriptorProto,
    head: list[str],
    proto3: bool,
    pool: descriptor_pool.DescriptorPool | None,
) -> str:
    """The file after its syntax line ``head``; ``proto3``: labels are implicit."""
    if file.package:
        head.append(f"package {file.package};")
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    imports = []
    for i, dependency in enumerate(file.dependency):
        kind = "public " if i in public else "weak " if i in weak else ""
        imports.append(f"import {kind}{_quote(dependency)};")
    scope = f".{file.package}" if file.package else ""
    types = [line for m in file.message_type for line in _message(m, scope, proto3, "", pool)]
    types += [line for enum in file.enum_type for line in _enum(enum, "", pool)]
    sections = [
        head,
        imports,
        [f"option {item};" for item in _options(file.options, pool)],
        types,
        _extends(file.extension, proto3, "", pool),
        [line for service in file.service for line in _service(service, pool)],
    ]
    # Confluent's layout: the sections apart by one blank line.
    return "\n\n".join("\n".join(section) for section in sections if section) + "\n"


def _message(
    message: descriptor_pb2.DescriptorProto,
    scope: str,
    proto3: bool,
    indent: str,
    pool: descriptor_pool.DescriptorPool | None,
    head: str | None = None,
) -> list[str]:
    """A message in Confluent's order: reserved, options, fields (a oneof where its first
    field is, keeping the descriptor's field order), extension ranges, extends, nested
    messages, nested enums. ``head`` replaces the ``message`` line (a group's body).

    protoc adds a map's entry type and a group's type to the nested types where the field is
    declared, and the nested types' order is the message indexes' (Confluent's wire format):
    a nested message declared before such a field is printed before it."""
    full_name = f"{scope}.{message.name}"
    inner = indent + _INDENT
    names = [f"{full_name}.{nested.name}" for nested in message.nested_type]
    groups = {f.type_name for f in message.field if f.type == _FDP.TYPE_GROUP}
    inline = {
        name: nested
        for name, nested in zip(names, message.nested_type, strict=True)
        if nested.options.map_entry or name in groups
    }
    out = [head or f"{indent}message {message.name} {{"]
    if message.reserved_range:
        spans = ", ".join(_span(r.start, r.end - 1) for r in message.reserved_range)
        out.append(f"{inner}reserved {spans};")
    if message.reserved_name:
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in message.reserved_name)};")
    out += [f"{inner}option {item};" for item in _options(message.options, pool)]
    printed = 0  # nested types before this index are printed (or inline)

    def flush(fields: list[descriptor_pb2.FieldDescriptorProto]) -> None:
        nonlocal printed
        upto = max(
            (names.index(f.type_name) + 1 for f in fields if f.type_name in inline), default=0
        )
        for name, nested in zip(
            names[printed:upto], message.nested_type[printed:upto], strict=True
        ):
            if name not in inline:
                out.extend(_message(nested, full_name, proto3, inner, pool))
        printed = max(printed, upto)

    def field_lines(
        field: descriptor_pb2.FieldDescriptorProto, at: str, in_oneof: bool
    ) -> list[str]:
        text = at + _field(field, proto3, inline, pool, in_oneof=in_oneof)
        if field.type != _FDP.TYPE_GROUP:
            return [text]
        group = inline.get(field.type_name)
        if group is None or field.name != group.name.lower():
            raise UnprintableSchema(f"group field '{field.name}' has no group type of its own")
        return _message(group, full_name, proto3, at, pool, head=text)

    printed_oneofs: set[int] = set()
    for field in message.field:
        if not field.HasField("oneof_index") or field.proto3_optional:
            flush([field])
            out += field_lines(field, inner, False)
            continue
        index = field.oneof_index
        if index in printed_oneofs:
            continue
        printed_oneofs.add(index)
        members = [f for f in message.field if f.HasField("oneof_index") and f.oneof_index == index]
        flush(members)
        oneof = message.oneof_decl[index]
        out.append(f"{inner}oneof {oneof.name} {{")
        out += [f"{inner}{_INDENT}option {item};" for item in _options(oneof.options, pool)]
        for member in members:
            out += field_lines(member, inner + _INDENT, True)
        out.append(f"{inner}}}")
    for extension_range in message.extension_range:
        items = _options(extension_range.options, pool)
        if extension_range.HasField("options") and not items:
            # Present but empty: what protoc leaves of a range whose options were all
            # source-retention ones (descriptor.proto's ``declaration``s). A source-retention
            # option makes protoc write the same empty message back.
            items = ["verification = UNVERIFIED"]
        span = _span(extension_range.start, extension_range.end - 1)
        out.append(f"{inner}extensions {span}{_bracketed(items)};")
    out += _extends(message.extension, proto3, inner, pool)
    for name, nested in zip(names[printed:], message.nested_type[printed:], strict=True):
        if name not in inline:
            out += _message(nested, full_name, proto3, inner, pool)
    for enum in message.enum_type:
        out += _enum(enum, inner, pool)
    out.append(f"{indent}}}")
    return out


def _field(
    field: descriptor_pb2.FieldDescriptorProto,
    proto3: bool,
    inline: dict[str, descriptor_pb2.DescriptorProto],
    pool: descriptor_pool.DescriptorPool | None,
    *,
    in_oneof: bool = False,
) -> str:
    """One field declaration, without indentation; a group's ends in ``{`` (its body
    follows). ``inline`` are the message's map-entry and group types, by full name."""
    entry = inline.get(field.type_name) if field.label == _FDP.LABEL_REPEATED else None
    if entry is not None and entry.options.map_entry:
        key, value = sorted(entry.field, key=lambda f: f.number)
        type_text = f"map<{_type(key)}, {_type(value)}>"
        label = ""
    else:
        type_text = _type(field)
        if field.label == _FDP.LABEL_REPEATED:
            label = "repeated "
        elif in_oneof or (proto3 and not field.proto3_optional):
            label = ""
        else:
            label = _LABELS[field.label] + " "
    items = []
    if field.HasField("default_value"):
        items.append(f"default = {_default(field)}")
    if field.HasField("json_name") and field.json_name != _json_name(field.name):
        items.append(f"json_name = {_quote(field.json_name)}")
    items += _options(field.options, pool)
    if field.type == _FDP.TYPE_GROUP:
        group = field.type_name.rsplit(".", 1)[-1]
        return f"{label}group {group} = {field.number}{_bracketed(items)} {{"
    return f"{label}{type_text} {field.name} = {field.number}{_bracketed(items)};"


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    if field.type in _SCALARS:
        return _SCALARS[field.type]
    if field.type == _FDP.TYPE_GROUP:
        return "group"
    if not field.type_name:
        raise UnprintableSchema(f"field '{field.name}' has neither a scalar type nor a type name")
    return field.type_name


def _default(field: descriptor_pb2.FieldDescriptorProto) -> str:
    value = field.default_value
    if field.type == _FDP.TYPE_STRING:
        return _quote(value)
    if field.type == _FDP.TYPE_BYTES:
        # protoc stores a bytes default C-escaped already: it is printed as it stands.
        return f'"{value}"'
    return value


def _enum(
    enum: descriptor_pb2.EnumDescriptorProto,
    indent: str,
    pool: descriptor_pool.DescriptorPool | None,
) -> list[str]:
    inner = indent + _INDENT
    out = [f"{indent}enum {enum.name} {{"]
    out += [f"{inner}option {item};" for item in _options(enum.options, pool)]
    for value in enum.value:
        options = _bracketed(_options(value.options, pool))
        out.append(f"{inner}{value.name} = {value.number}{options};")
    if enum.reserved_range:
        # An enum's reserved range is inclusive at both ends, unlike a message's.
        spans = ", ".join(_span(r.start, r.end, _MAX_ENUM_NUMBER) for r in enum.reserved_range)
        out.append(f"{inner}reserved {spans};")
    if enum.reserved_name:
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    out.append(f"{indent}}}")
    return out


def _extends(
    extensions: Iterable[descriptor_pb2.FieldDescriptorProto],
    proto3: bool,
    indent: str,
    pool: descriptor_pool.DescriptorPool | None,
) -> list[str]:
    """One ``extend`` block per run of extensions of the same type, in declaration order."""
    out: list[str] = []
    extendee = None
    for extension in extensions:
        if extension.extendee != extendee:
            if extendee is not None:
                out.append(f"{indent}}}")
            extendee = extension.extendee
            out.append(f"{indent}extend {extendee} {{")
        if extension.type == _FDP.TYPE_GROUP:
            raise UnprintableSchema(f"extension '{extension.name}' is a proto2 group")
        # An extension always has a label in the text, proto3 too (custom options).
        field = _field(extension, False, {}, pool)
        if proto3 and extension.label == _FDP.LABEL_OPTIONAL and not extension.proto3_optional:
            field = field.removeprefix("optional ")
        out.append(indent + _INDENT + field)
    if extendee is not None:
        out.append(f"{indent}}}")
    return out


def _service(
    service: descriptor_pb2.ServiceDescriptorProto, pool: descriptor_pool.DescriptorPool | None
) -> list[str]:
    out = [f"service {service.name} {{"]
    out += [f"{_INDENT}option {item};" for item in _options(service.options, pool)]
    for method in service.method:
        request = ("stream " if method.client_streaming else "") + method.input_type
        response = ("stream " if method.server_streaming else "") + method.output_type
        head = f"{_INDENT}rpc {method.name} ({request}) returns ({response})"
        options = _options(method.options, pool)
        if not options:
            out.append(head + ";")
            continue
        out.append(head + " {")
        out += [f"{_INDENT * 2}option {item};" for item in options]
        out.append(f"{_INDENT}}}")
    out.append("}")
    return out


def _options(options: Message, pool: descriptor_pool.DescriptorPool | None) -> list[str]:
    """``name = value`` for each set field of an options message (a repeated one once a value);
    a custom option as ``(.full.name) = value``.

    Custom options are extensions the schema (or its imports) defines: ``options`` holds them
    as unknown fields, so with ``pool`` (the file built with its imports) the options are read
    again as that pool's options type, which knows them. ``features`` (editions) are an
    options message's field like any other; ``uninterpreted_option`` is not printed (protoc
    interprets every option of a file it compiles)."""
    if pool is not None and options.ByteSize():
        try:
            own_type = pool.FindMessageTypeByName(options.DESCRIPTOR.full_name)
        except KeyError:  # descriptor.proto is not imported: no custom option can be set
            own_type = None
        if own_type is not None:
            options = message_factory.GetMessageClass(own_type).FromString(
                options.SerializeToString()
            )
    items = []
    for field, value in options.ListFields():
        if field.name == "uninterpreted_option":
            continue
        name = f"(.{field.full_name})" if field.is_extension else field.name
        values = value if field.is_repeated else [value]
        items += [f"{name} = {_literal(field, v)}" for v in values]
    return items


def _literal(field: FieldDescriptor, value: object) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        assert isinstance(value, Message)
        return "{ " + text_format.MessageToString(value, as_one_line=True) + " }"
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None and isinstance(value, int)
        return field.enum_type.values_by_number[value].name
    if field.type == FieldDescriptor.TYPE_BOOL:
        return "true" if value else "false"
    if isinstance(value, bytes):
        return '"' + "".join(_escape_byte(b) for b in value) + '"'
    if isinstance(value, str):
        return _quote(value)
    return repr(value) if isinstance(value, float) else str(value)


def _bracketed(items: list[str]) -> str:
    return f" [{', '.join(items)}]" if items else ""


def _span(start: int, end: int, top: int = _MAX_FIELD_NUMBER) -> str:
    """``start``, ``start to end`` or ``start to max`` (``top`` is what ``max`` means)."""
    if start == end:
        return str(start)
    return f"{start} to {'max' if end == top else end}"


def _json_name(name: str) -> str:
    """protoc's default ``json_name``: underscores dropped, the letter after one upper-cased."""
    out, upper = [], False
    for char in name:
        if char == "_":
            upper = True
        elif upper:
            out.append(char.upper())
            upper = False
        else:
            out.append(char)
    return "".join(out)


def _quote(text: str) -> str:
    escaped = []
    for char in text:
        if char in "\\\"'":
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\{ord(char):03o}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _escape_byte(byte: int) -> str:
    char = chr(byte)
    if char in "\\\"'":
        return "\\" + char
    return char if 0x20 <= byte < 0x7F else f"\\{byte:03o}"
