"""Parsing registered Protobuf schemas into descriptors, and the identity of a Protobuf schema.

A client registers a Protobuf schema in one of two forms, both accepted as Confluent does:

* ``.proto`` text (``curl``, the Java serializer), compiled here with **protoc itself**, as
  bundled in ``grpcio-tools``. Why protoc and not a pure-Python parser such as
  ``proto-schema-parser``: a parser gives a syntax tree, and turning it into descriptors means
  resolving type names, packages, nested scopes, ``map<>`` entries and proto2/proto3 rules by
  hand — protoc is the reference for all of that, keeps up with the language (editions), and
  reports errors with line and column. protoc runs in-process (``grpc_tools``'
  ``run_main``) and writes the file's ``FileDescriptorProto`` with ``--descriptor_set_out``.
  When it refuses the text, it has printed its errors to standard error (they reach the
  registry's log) and the text is compiled again with ``get_protos``, which raises them as
  ``ProtocErrors`` for the 42201 message; ``get_protos`` is not the first choice because it
  generates Python modules too: a 900 kB schema of 20,000 messages took 8.6 s that way
  against 1.7 s (measured). Refused texts stop before code generation, so the second
  compile costs no more than the first.
* the base64 of a serialized ``FileDescriptorProto`` (what confluent-kafka's
  ``ProtobufSerializer`` sends), decoded and checked by building it in a fresh
  ``DescriptorPool``.

Imports: the well-known types (``google/protobuf/timestamp.proto`` and the others protobuf
ships) resolve as they do for confluent-kafka, whose serializer leaves them out of the
references by default (``skip.known.types``). Any other import must be a schema reference's
name: the referenced schemas' descriptors, each renamed to the name it is imported by, are
given to protoc as a descriptor set (``--descriptor_set_in``) and added to the pool the file
is built in. An import that is neither is refused with 42201.

Identity: the normalized form is the base64 of the ``FileDescriptorProto`` serialized
deterministically without its file name, source locations and derived ``json_name`` values, so
a ``.proto`` text and the descriptor a client built from the same file find the same id.
``text`` is the ``.proto`` text: as first registered, or — for a schema first registered as
base64, as Confluent's registry serves it — printed from the descriptor
(:mod:`sluice.schemas.protobuf_text`). The printed text is kept only if protoc compiles it back
to the same normalized form (checked at registration, one more compile); otherwise (a proto2
group extension) ``text`` stays the base64 as registered. Either way the normalized form, and
so the id, is the descriptor's. ``formatted("serialized")`` is the base64
descriptor a deserializer asks for with ``GET /schemas/ids/{id}?format=serialized``.

Hostile input: the text is bounded in size and brace depth by the request limits before it
gets here; protoc is a C++ parser with its own recursion limits; a compile runs in a private
temporary directory whose only other readable files are protobuf's bundled ``.proto`` files
(protoc refuses ``..`` and absolute import paths). One compile at a time (a module lock):
protoc's in-process entry point is not documented as thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import logging
import re
import tempfile
import threading
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import ClassVar

from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    descriptor_pool,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)
from google.protobuf.message import DecodeError
from grpc_tools import _protoc_compiler

from sluice.schemas.errors import InvalidSchemaError
from sluice.schemas.protobuf_schema_diff import diff
from sluice.schemas.protobuf_text import UnprintableSchema, print_proto
from sluice.schemas.schema_type import ParsedSchema, ResolvedReference, SchemaType, verdict_trailer

SERIALIZED = "serialized"
_FILE_NAME = "schema.proto"
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
_WELL_KNOWN = {
    m.DESCRIPTOR.name: m.DESCRIPTOR.serialized_pb
    for m in (
        any_pb2,
        api_pb2,
        descriptor_pb2,
        duration_pb2,
        empty_pb2,
        field_mask_pb2,
        source_context_pb2,
        struct_pb2,
        timestamp_pb2,
        type_pb2,
        wrappers_pb2,
    )
}
_PROTOC_INCLUDE = str(resources.files("grpc_tools") / "_proto")
_compile_lock = threading.Lock()
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProtobufSchema(ParsedSchema):
    """A parsed, valid Protobuf schema; ``file`` is its ``FileDescriptorProto`` (not to be
    mutated)."""

    schema_type: ClassVar[SchemaType] = SchemaType.PROTOBUF
    text: str
    normalized: str
    file: descriptor_pb2.FileDescriptorProto

    def formatted(self, fmt: str | None) -> str:
        if fmt == SERIALIZED:
            return base64.standard_b64encode(self.file.SerializeToString()).decode("ascii")
        return self.text

    def incompatibilities(
        self,
        writer: ParsedSchema,
        *,
        reader_role: str,
        writer_role: str,
        old_version: int,
        level: str,
    ) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        found = [d for d in diff(writer.file, self.file) if not d.compatible]
        if not found:
            return []
        messages = [d.message(update_role=reader_role, original_role=writer_role) for d in found]
        return messages + verdict_trailer(old_version, level)


def parse_protobuf_schema(
    text: str, references: Sequence[ResolvedReference] = ()
) -> ProtobufSchema:
    """Parse ``.proto`` text or a base64 ``FileDescriptorProto``; raise 42201 if invalid.

    ``references`` are Protobuf schemas, dependencies first, imported by their names."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Invalid schema: expected Protobuf schema text, found empty")
    imported = _imported_files(references)
    stripped = text.strip()
    file = _from_base64(stripped) if _BASE64.fullmatch(stripped) else None
    if file is None:
        file = _compile(text, imported)
        _check_builds(file, imported)
        return ProtobufSchema(text=text, normalized=_normalized(file), file=file)
    pool = _check_builds(file, imported)
    normalized = _normalized(file)
    return ProtobufSchema(
        text=_printed(file, pool, normalized, imported, text), normalized=normalized, file=file
    )


def _printed(
    file: descriptor_pb2.FileDescriptorProto,
    pool: descriptor_pool.DescriptorPool,
    normalized: str,
    imported: Sequence[descriptor_pb2.FileDescriptorProto],
    registered: str,
) -> str:
    """``file`` as ``.proto`` text if that text compiles back to ``normalized``, else the
    base64 ``registered`` (a printer gap must never change what the schema is)."""
    try:
        printed = print_proto(file, pool)
        again = _compile(printed, imported)
    except (UnprintableSchema, InvalidSchemaError, RecursionError) as e:
        _log.info("Protobuf schema kept as base64: %s", e)
        return registered
    if _normalized(again) != normalized:
        _log.info("Protobuf schema kept as base64: its printed text compiles to another descriptor")
        return registered
    return printed


def _imported_files(
    references: Sequence[ResolvedReference],
) -> list[descriptor_pb2.FileDescriptorProto]:
    """Each referenced schema's descriptor under the name it is imported by, in order."""
    files = []
    for ref in references:
        assert isinstance(ref.schema, ProtobufSchema)
        file = descriptor_pb2.FileDescriptorProto()
        file.CopyFrom(ref.schema.file)
        file.name = ref.name
        files.append(file)
    return files


def _from_base64(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor ``text`` encodes, or ``None`` if it is not one (then it is ``.proto``)."""
    try:
        raw = base64.b64decode(text, validate=True)
        file = descriptor_pb2.FileDescriptorProto()
        file.ParseFromString(raw)
    except (binascii.Error, ValueError, DecodeError):
        return None
    # A .proto text always has a character outside base64's alphabet (a space, ';', '{'), so
    # text that decodes to a descriptor is one; whether it builds is checked next.
    return file


def _compile(
    text: str, imported: Sequence[descriptor_pb2.FileDescriptorProto] = ()
) -> descriptor_pb2.FileDescriptorProto:
    with _compile_lock, tempfile.TemporaryDirectory(prefix="sluice-proto-") as work:
        Path(work, _FILE_NAME).write_text(text, encoding="utf-8", errors="surrogatepass")
        out = Path(work, "schema.desc")
        include = [work.encode(), _PROTOC_INCLUDE.encode()]
        args = [b"protoc", *(b"-I" + path for path in include)]
        if imported:
            deps = Path(work, "references.desc")
            deps.write_bytes(
                descriptor_pb2.FileDescriptorSet(
                    file=[*_well_known_files(imported), *imported]
                ).SerializeToString()
            )
            args.append(b"--descriptor_set_in=" + bytes(deps))
        args += [b"--descriptor_set_out=" + bytes(out), _FILE_NAME.encode()]
        try:
            if _protoc_compiler.run_main(args) == 0:
                files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file
                for file in files:
                    if file.name == _FILE_NAME:
                        return file
                raise InvalidSchemaError("Invalid schema: protoc produced no descriptor")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # protoc's warnings (unused imports) are not errors
                _protoc_compiler.get_protos(_FILE_NAME.encode(), include)
        except _protoc_compiler.ProtocErrors as e:
            details = "; ".join(
                f"line {err.line + 1}, column {err.column}: {_text(err.message)}"
                for err in e.errors()
            )
            raise InvalidSchemaError(f"Invalid schema: {details}") from e
        except RecursionError as e:
            raise InvalidSchemaError("Invalid schema: nested too deeply to parse") from e
    raise InvalidSchemaError("Invalid schema: protoc refused it (its log has the reason)")


def _well_known_files(
    files: Sequence[descriptor_pb2.FileDescriptorProto],
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The well-known files ``files`` import, with theirs, dependencies first."""
    result: list[descriptor_pb2.FileDescriptorProto] = []
    added: set[str] = set()

    def add(name: str) -> None:
        if name in added or name not in _WELL_KNOWN:
            return
        known = descriptor_pb2.FileDescriptorProto.FromString(_WELL_KNOWN[name])
        for dependency in known.dependency:
            add(dependency)
        result.append(known)
        added.add(name)

    for file in files:
        for dependency in file.dependency:
            add(dependency)
    return result


def _check_builds(
    file: descriptor_pb2.FileDescriptorProto,
    imported: Sequence[descriptor_pb2.FileDescriptorProto] = (),
) -> descriptor_pool.DescriptorPool:
    """Build ``file`` in a fresh pool with the well-known types and the referenced files, and
    return the pool; 42201 if it does not build."""
    known = {f.name for f in imported}
    for dependency in file.dependency:
        if dependency not in _WELL_KNOWN and dependency not in known:
            raise InvalidSchemaError(
                f"Invalid schema: import '{dependency}' is neither a well-known type nor the "
                "name of one of the schema's references"
            )
    pool = descriptor_pool.DescriptorPool()
    try:
        for imported_file in [*_well_known_files([*imported, file]), *imported]:
            pool.Add(imported_file)
        pool.Add(file)
        pool.FindFileByName(file.name)
    except (TypeError, ValueError, KeyError) as e:
        raise InvalidSchemaError(f"Invalid schema: {e}") from e
    return pool


def _normalized(file: descriptor_pb2.FileDescriptorProto) -> str:
    canonical = descriptor_pb2.FileDescriptorProto()
    canonical.CopyFrom(file)
    canonical.ClearField("name")
    canonical.ClearField("source_code_info")

    def clear_json_names(message: descriptor_pb2.DescriptorProto) -> None:
        for f in message.field:
            f.ClearField("json_name")
        for f in message.extension:
            f.ClearField("json_name")
        for nested in message.nested_type:
            clear_json_names(nested)

    for message in canonical.message_type:
        clear_json_names(message)
    for extension in canonical.extension:
        extension.ClearField("json_name")
    serialized = canonical.SerializeToString(deterministic=True)
    return base64.standard_b64encode(serialized).decode("ascii")


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
