"""The cluster-mode registry store: shared state in ZooKeeper, through kazoo.

Selected by ``schema.registry.zookeeper.connect=host:port[,host:port...][/chroot]``; any number
of registry processes may share one ZooKeeper (and chroot) and give the same answers.

Layout, below ``<chroot>/sluice/schema_registry`` (one class per znode further down, each with
``path``, ``encode``, ``decode``; JSON payloads carry ``"version": 1``, as in Kafka's ZkData)::

    lock/                                kazoo Lock recipe: held for each write transaction
    schema_id_counter/id-0000000000      one empty persistent sequential znode per id ever
                                         handed out; id = sequence number + 1
    imported_ids/<id>                    empty; an id an import chose (kept for good)
    schemas/<id>                         {"version": 1, "schema": "<text>",
                                          "schemaType": "AVRO", "fingerprint": "<sha256 hex>",
                                          "references"?, "metadata"?, "ruleSet"?}
    fingerprints/<sha256 hex>            {"version": 1, "id": <id>}  (find_schema's index)
    subjects/<subject>                   {"version": 1, "subject": "<subject>"}
    subjects/<subject>/versions/<n>      {"version": 1, "id": <id>, "deleted": false}
    config/global                        {"version": 1, "compatibilityLevel": "FULL"}
    config/subjects/<subject>            {"version": 1, "compatibilityLevel": "NONE"}
    mode/global                          {"version": 1, "mode": "READWRITE"}
    mode/subjects/<subject>              {"version": 1, "mode": "IMPORT"}
    contexts/<context>/...               schema_id_counter, imported_ids, schemas and
                                         fingerprints of another context, as above

The top-level id counter, imported ids, schemas and fingerprints are the default context's;
another context (:mod:`sluice.schemas.context`) has its own four below ``contexts/<context>``,
created by its first allocation or import.

``<subject>`` is percent-encoded (``urllib.parse.quote`` with no safe characters; ``.`` and
``..`` encoded too), so any subject string is one znode name.

**Ids.** A sequential create under ``schema_id_counter`` is atomic on the ZooKeeper leader, so
two processes never get one id. The sequence is the parent's child-version counter, kept in
the znode itself: it only grows and survives restarts, so an id is never handed out twice — as
long as ``schema_id_counter`` itself is never deleted (that would restart the sequence; the
``create`` of ``schemas/<id>`` would then fail rather than overwrite). The children are kept
(a few bytes each): they record every allocation, and :meth:`put_schema` is conditional on its
id's one. An id allocated in a transaction that rolls back is never used (a gap, not a
reuse). An id an import chose (:meth:`~ZooKeeperSchemaStore.reserve_id`) gets an
``imported_ids/<id>`` node in the import's transaction;
:meth:`~ZooKeeperSchemaStore.allocate_id` skips a sequence number that has one (under the lock,
so no import can be half-committed meanwhile).

**Why a lock and conditional writes.** A registry decides on what it read (is this schema
known? which version number is next?), so two processes must not interleave their decisions.
The lock serializes them; the conditions below make a commit fail, rather than corrupt, if the
lock was lost. With the lock removed, the two-process test fails only with refused commits.

**Transactions.** The outermost :meth:`transaction` takes the ZooKeeper lock (so registry
processes serialize their read-check-write sequences, as the in-process lock does for threads),
buffers every write in a write set (reads inside see it), and commits the set as one ZooKeeper
``multi``: all of it or none. The multi is conditional on the state it was built from: nodes
are created only if absent (a child missing from a listing the transaction made stays a
create), set and deleted only at the znode version read, and a version record is written only
if its schema node still exists. So even a process that lost its lock
without noticing (session expired during a network partition) cannot commit over another
process's writes. If the session is lost while the block runs, the commit is refused.
A commit whose reply is lost (connection dropped mid-request) raises :class:`StoreError`
although it may have been applied; a registry client that retries gets the same id back.

Reads outside a transaction go straight to ZooKeeper (no cache: every process sees every
committed write at once); each read is of one znode, so a listing made of several reads is not
a snapshot, but every record it shows was committed whole.

Not thread-safe (see :class:`~sluice.schemas.store.SchemaStore`): the registry's lock serializes
calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, LockTimeout, NoNodeError, RolledBackError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock

from sluice.schemas.context import DEFAULT_CONTEXT, context_of
from sluice.schemas.errors import StoreError
from sluice.schemas.store import (
    SchemaStore,
    StoredSchema,
    SubjectVersion,
    schema_from_payload,
    schema_payload,
)

BASE_PATH = "/sluice/schema_registry"
PAYLOAD_VERSION = 1


# --------------------------------------------------------------------------------------------
# Znodes. Paths are relative to the registry root (``<chroot>/sluice/schema_registry``).
# --------------------------------------------------------------------------------------------


def node_name(name: str) -> str:
    """``name`` as one znode name: percent-encoded, never ``.``, ``..`` or empty."""
    if not name:
        raise StoreError("a subject name must not be empty")
    encoded = urllib.parse.quote(name, safe="")
    return encoded.replace(".", "%2E") if encoded in {".", ".."} else encoded


def _decode(path: str, data: bytes) -> dict[str, Any]:
    try:
        payload = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise StoreError(f"corrupt znode {path}: expected JSON, found {data[:80]!r}") from e
    found = payload.get("version") if isinstance(payload, dict) else None
    if found != PAYLOAD_VERSION:
        raise StoreError(f"znode {path}: expected version {PAYLOAD_VERSION}, found {found!r}")
    return payload  # type: ignore[no-any-return]


def _encode(payload: dict[str, Any]) -> bytes:
    return json.dumps({"version": PAYLOAD_VERSION, **payload}, sort_keys=True).encode()


class LockZNode:
    path = "/lock"


class SchemaIdCounterZNode:
    """The parent of the id sequence; ``id-<10 digits>`` children, one per allocated id."""

    path = "/schema_id_counter"
    prefix = path + "/id-"

    @classmethod
    def child_path(cls, schema_id: int) -> str:
        """The counter node created when ``schema_id`` was allocated."""
        return f"{cls.prefix}{schema_id - 1:010d}"

    @staticmethod
    def id_of(created_path: str) -> int:
        return int(created_path.rsplit("-", 1)[1]) + 1


class SchemasZNode:
    path = "/schemas"


class SchemaZNode:
    @staticmethod
    def path(schema_id: int) -> str:
        return f"{SchemasZNode.path}/{schema_id}"

    @staticmethod
    def encode(schema: StoredSchema) -> bytes:
        return _encode(schema_payload(schema))

    @staticmethod
    def decode(schema_id: int, data: bytes) -> StoredSchema:
        return schema_from_payload(schema_id, _decode(SchemaZNode.path(schema_id), data))


class ImportedIdZNode:
    """An id chosen by an import; its existence is all it says."""

    parent = "/imported_ids"

    @staticmethod
    def path(schema_id: int) -> str:
        return f"{ImportedIdZNode.parent}/{schema_id}"


class FingerprintsZNode:
    path = "/fingerprints"


class FingerprintZNode:
    """Index: fingerprint → id. Its ``create`` failing is what stops two ids for one schema."""

    @staticmethod
    def path(fingerprint: str) -> str:
        return f"{FingerprintsZNode.path}/{node_name(fingerprint)}"

    @staticmethod
    def encode(schema_id: int) -> bytes:
        return _encode({"id": schema_id})

    @staticmethod
    def decode(fingerprint: str, data: bytes) -> int:
        return int(_decode(FingerprintZNode.path(fingerprint), data)["id"])


class SubjectsZNode:
    path = "/subjects"


class SubjectZNode:
    @staticmethod
    def path(subject: str) -> str:
        return f"{SubjectsZNode.path}/{node_name(subject)}"

    @staticmethod
    def encode(subject: str) -> bytes:
        return _encode({"subject": subject})

    @staticmethod
    def decode_name(child: str) -> str:
        return urllib.parse.unquote(child)


class SubjectVersionsZNode:
    @staticmethod
    def path(subject: str) -> str:
        return f"{SubjectZNode.path(subject)}/versions"


class SubjectVersionZNode:
    @staticmethod
    def path(subject: str, version: int) -> str:
        return f"{SubjectVersionsZNode.path(subject)}/{version}"

    @staticmethod
    def encode(record: SubjectVersion) -> bytes:
        return _encode({"id": record.schema_id, "deleted": record.deleted})

    @staticmethod
    def decode(subject: str, version: int, data: bytes) -> SubjectVersion:
        p = _decode(SubjectVersionZNode.path(subject, version), data)
        return SubjectVersion(subject, version, int(p["id"]), bool(p["deleted"]))


class ConfigZNode:
    path = "/config"
    subjects_path = "/config/subjects"

    @staticmethod
    def path_of(subject: str | None) -> str:
        if subject is None:
            return f"{ConfigZNode.path}/global"
        return f"{ConfigZNode.subjects_path}/{node_name(subject)}"

    @staticmethod
    def encode(level: str) -> bytes:
        return _encode({"compatibilityLevel": level})

    @staticmethod
    def decode(subject: str | None, data: bytes) -> str:
        return str(_decode(ConfigZNode.path_of(subject), data)["compatibilityLevel"])


class ModeZNode:
    path = "/mode"
    subjects_path = "/mode/subjects"

    @staticmethod
    def path_of(subject: str | None) -> str:
        if subject is None:
            return f"{ModeZNode.path}/global"
        return f"{ModeZNode.subjects_path}/{node_name(subject)}"

    @staticmethod
    def encode(mode: str) -> bytes:
        return _encode({"mode": mode})

    @staticmethod
    def decode(subject: str | None, data: bytes) -> str:
        return str(_decode(ModeZNode.path_of(subject), data)["mode"])


class ContextsZNode:
    """The parent of every non-default context's id space."""

    path = "/contexts"


# The id space of a context, below the root (default context) or contexts/<context>.
CONTEXT_PATHS = (
    SchemaIdCounterZNode.path,
    SchemasZNode.path,
    FingerprintsZNode.path,
    ImportedIdZNode.parent,
)

PERSISTENT_PATHS = (
    LockZNode.path,
    SchemaIdCounterZNode.path,
    SchemasZNode.path,
    FingerprintsZNode.path,
    SubjectsZNode.path,
    ConfigZNode.subjects_path,
    ModeZNode.subjects_path,
    ImportedIdZNode.parent,
)


def split_connect(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/chroot"`` → ``("h1:2181,h2:2181", "/chroot")`` (chroot may be "")."""
    hosts, slash, chroot = connect.strip().partition("/")
    if not hosts:
        raise StoreError(f"zookeeper connect: expected host:port[/chroot], found {connect!r}")
    chroot = ("/" + chroot).rstrip("/") if slash else ""
    return hosts, chroot


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class _Op(NamedTuple):
    """One operation of a commit's multi; ``version`` is the znode version it is conditional on."""

    kind: str  # check | delete | create | set
    path: str
    data: bytes | None
    version: int | None

    def __str__(self) -> str:
        return f"{self.kind} {self.path}" + ("" if self.version is None else f"@{self.version}")


@dataclass
class _WriteSet:
    """The buffered writes of one transaction. Paths are absolute."""

    writes: dict[str, bytes | None] = field(default_factory=dict)  # None: delete
    versions: dict[str, int | None] = field(default_factory=dict)  # as read; None: absent
    listed: dict[str, set[str]] = field(default_factory=dict)  # parent → children as listed
    checks: dict[str, int] = field(default_factory=dict)  # must exist at this version
    session: int = 0


class ZooKeeperSchemaStore(SchemaStore):
    """A :class:`SchemaStore` shared through ZooKeeper (see the module docstring)."""

    SESSION_TIMEOUT: ClassVar[float] = 10.0
    CONNECT_TIMEOUT: ClassVar[float] = 15.0
    LOCK_TIMEOUT: ClassVar[float] = 30.0

    def __init__(
        self,
        connect: str,
        *,
        session_timeout: float = SESSION_TIMEOUT,
        connect_timeout: float = CONNECT_TIMEOUT,
        lock_timeout: float = LOCK_TIMEOUT,
    ) -> None:
        hosts, chroot = split_connect(connect)
        self.connect = connect
        self.root = chroot + BASE_PATH
        self.lock_timeout = lock_timeout
        self._txn: _WriteSet | None = None
        self._depth = 0
        self._sessions_lost = 0  # bumped by kazoo's thread when a session is LOST
        self._closed = False
        self._zk = KazooClient(hosts=hosts, timeout=session_timeout)
        self._zk.add_listener(self._on_state)
        try:
            self._zk.start(timeout=connect_timeout)
            for path in PERSISTENT_PATHS:
                self._zk.ensure_path(self.root + path)
        except (KazooException, KazooTimeoutError) as e:
            self.close()
            raise StoreError(f"cannot open ZooKeeper store at {connect}: {e!r}") from e
        except BaseException:
            self.close()
            raise
        identifier = f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"
        self._lock = Lock(self._zk, self.root + LockZNode.path, identifier)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._sessions_lost += 1

    @contextlib.contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """Turn kazoo failures into :class:`StoreError` naming the operation."""
        if self._closed:
            raise StoreError(f"ZooKeeper store {self.connect} is closed")
        try:
            yield
        except (KazooException, KazooTimeoutError) as e:
            raise StoreError(f"ZooKeeper store {self.connect}: {what} failed: {e!r}") from e

    # -- znode access through the write set ---------------------------------------------------

    def _read(self, path: str) -> bytes | None:
        """The data of ``root + path`` as this transaction sees it, or ``None`` if absent."""
        full = self.root + path
        txn = self._txn
        if txn is not None and full in txn.writes:
            return txn.writes[full]
        with self._errors(f"read {full}"):
            try:
                data, stat = self._zk.get(full)
            except NoNodeError:
                data, version = None, None
            else:
                version = stat.version
        if txn is not None:
            txn.versions.setdefault(full, version)
        return data  # type: ignore[no-any-return]

    def _children(self, path: str) -> list[str]:
        """Child names of ``root + path`` as this transaction sees them."""
        full = self.root + path
        with self._errors(f"list {full}"):
            try:
                names = set(self._zk.get_children(full))
            except NoNodeError:
                names = set()
        if self._txn is not None:
            self._txn.listed.setdefault(full, set(names))
            prefix = full + "/"
            for written, data in self._txn.writes.items():
                name = written[len(prefix) :]
                if written.startswith(prefix) and "/" not in name:
                    if data is None:
                        names.discard(name)
                    else:
                        names.add(name)
        return sorted(names)

    def _write(self, path: str, data: bytes | None) -> None:
        """Buffer a write (``None``: delete) of ``root + path`` in the current transaction."""
        assert self._txn is not None, "writes happen inside _mutation()"
        full = self.root + path
        if full not in self._txn.versions:
            parent, _, name = full.rpartition("/")
            listing = self._txn.listed.get(parent)
            if listing is not None and name not in listing:
                # The transaction decided on a listing without this child: it must still be
                # absent at commit (a create), whatever a stat would find by now.
                self._txn.versions[full] = None
            else:
                with self._errors(f"stat {full}"):
                    stat = self._zk.exists(full)
                self._txn.versions[full] = None if stat is None else stat.version
        self._txn.writes[full] = data

    def _require(self, path: str, what: str) -> None:
        """Make the commit conditional on ``root + path`` (``what``, for the error) existing
        unchanged, unless this transaction writes it itself; raise if it is absent now."""
        assert self._txn is not None
        full = self.root + path
        if self._txn.writes.get(full) is not None:
            return
        self._read(path)
        version = self._txn.versions.get(full)
        if version is None or full in self._txn.writes:
            raise StoreError(f"{what} does not exist")
        self._txn.checks[full] = version

    # -- transactions --------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        if self._depth > 0:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        with self._errors("lock"):
            try:
                self._lock.acquire(timeout=self.lock_timeout)
            except LockTimeout as e:
                raise StoreError(
                    f"ZooKeeper store {self.connect}: another registry held the lock for "
                    f"more than {self.lock_timeout}s"
                ) from e
        self._txn = _WriteSet(session=self._sessions_lost)
        self._depth = 1
        try:
            yield
            self._commit(self._txn)
        finally:
            self._depth = 0
            self._txn = None
            with contextlib.suppress(KazooException, KazooTimeoutError):
                self._lock.release()

    def transaction(self) -> contextlib.AbstractContextManager[None]:
        return self._transaction()

    def _commit(self, txn: _WriteSet) -> None:
        if not txn.writes:
            return
        if self._sessions_lost != txn.session:
            raise StoreError(
                f"ZooKeeper store {self.connect}: the session expired during the transaction "
                "(the lock may have passed to another registry); nothing was written"
            )
        # Checks first (they are of nodes the multi does not write), then deletes leaves
        # first, then creates and sets parents first.
        ops = [_Op("check", path, None, at) for path, at in txn.checks.items()]
        deletes = [p for p, d in txn.writes.items() if d is None and txn.versions[p] is not None]
        for path in sorted(deletes, key=lambda p: p.count("/"), reverse=True):
            ops.append(_Op("delete", path, None, txn.versions[path]))
        puts = [p for p, d in txn.writes.items() if d is not None]
        for path in sorted(puts, key=lambda p: p.count("/")):
            at = txn.versions[path]
            ops.append(_Op("create" if at is None else "set", path, txn.writes[path], at))
        if all(op.kind == "check" for op in ops):  # nothing to write (deletes of absent nodes)
            return
        multi = self._zk.transaction()
        for op in ops:
            if op.kind == "check":
                multi.check(op.path, op.version)
            elif op.kind == "delete":
                multi.delete(op.path, op.version)
            elif op.kind == "create":
                multi.create(op.path, op.data)
            else:
                multi.set_data(op.path, op.data, op.version)
        with self._errors("commit"):
            results = multi.commit()
        for op, result in zip(ops, results, strict=True):
            if isinstance(result, Exception) and not isinstance(result, RolledBackError):
                raise StoreError(
                    f"ZooKeeper store {self.connect}: commit refused at '{op}': {result!r} "
                    "(the state changed under the transaction); nothing was written"
                )

    @contextlib.contextmanager
    def _mutation(self) -> Iterator[None]:
        with self._transaction():
            yield

    # -- ids and schemas -----------------------------------------------------------------------

    @staticmethod
    def _ctx(context: str) -> str:
        """The path prefix of ``context``'s id space ("" for the default context)."""
        return "" if context == DEFAULT_CONTEXT else f"{ContextsZNode.path}/{node_name(context)}"

    def _ensure_context(self, context: str) -> None:
        if context != DEFAULT_CONTEXT:
            with self._errors(f"create context {context}"):
                for path in CONTEXT_PATHS:
                    self._zk.ensure_path(self.root + self._ctx(context) + path)

    def allocate_id(self, context: str = DEFAULT_CONTEXT) -> int:
        self._ensure_context(context)
        ctx = self._ctx(context)
        path = self.root + ctx + SchemaIdCounterZNode.prefix
        while True:
            with self._errors("allocate an id"):
                created = self._zk.create(path, b"", sequence=True)
            schema_id = SchemaIdCounterZNode.id_of(created)
            if self._read(ctx + ImportedIdZNode.path(schema_id)) is None:
                return schema_id

    def reserve_id(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        self._ensure_context(context)
        path = self._ctx(context) + ImportedIdZNode.path(schema_id)
        with self._mutation():
            if self._read(path) is None:
                self._write(path, b"")

    def put_schema(self, schema: StoredSchema, context: str = DEFAULT_CONTEXT) -> None:
        ctx = self._ctx(context)
        with self._mutation():
            imported = self._read(ctx + ImportedIdZNode.path(schema.id)) is not None
            self._require(
                ctx
                + (
                    ImportedIdZNode.path(schema.id)
                    if imported
                    else SchemaIdCounterZNode.child_path(schema.id)
                ),
                f"schema id {schema.id} was not allocated: its counter node",
            )
            self._write(ctx + SchemaZNode.path(schema.id), SchemaZNode.encode(schema))
            self._write(
                ctx + FingerprintZNode.path(schema.fingerprint),
                FingerprintZNode.encode(schema.id),
            )

    def get_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        data = self._read(self._ctx(context) + SchemaZNode.path(schema_id))
        return None if data is None else SchemaZNode.decode(schema_id, data)

    def find_schema(self, fingerprint: str, context: str = DEFAULT_CONTEXT) -> StoredSchema | None:
        data = self._read(self._ctx(context) + FingerprintZNode.path(fingerprint))
        if data is None:
            return None
        return self.get_schema(FingerprintZNode.decode(fingerprint, data), context)

    def delete_schema(self, schema_id: int, context: str = DEFAULT_CONTEXT) -> None:
        ctx = self._ctx(context)
        with self._mutation():
            stored = self.get_schema(schema_id, context)
            if stored is None:
                return
            self._write(ctx + SchemaZNode.path(schema_id), None)
            index = ctx + FingerprintZNode.path(stored.fingerprint)
            data = self._read(index)
            if data is not None and FingerprintZNode.decode(stored.fingerprint, data) == schema_id:
                self._write(index, None)

    # -- subjects and versions -----------------------------------------------------------------

    def subjects(self) -> list[str]:
        names = [SubjectZNode.decode_name(c) for c in self._children(SubjectsZNode.path)]
        return sorted(s for s in names if self._children(SubjectVersionsZNode.path(s)))

    def versions(self, subject: str) -> list[SubjectVersion]:
        records = []
        for child in sorted(self._children(SubjectVersionsZNode.path(subject)), key=int):
            version = int(child)
            data = self._read(SubjectVersionZNode.path(subject, version))
            if data is not None:  # removed between the listing and the read
                records.append(SubjectVersionZNode.decode(subject, version, data))
        return records

    def put_version(self, version: SubjectVersion) -> None:
        with self._mutation():
            subject = version.subject
            if self._read(SubjectZNode.path(subject)) is None:
                self._write(SubjectZNode.path(subject), SubjectZNode.encode(subject))
            if self._read(SubjectVersionsZNode.path(subject)) is None:
                self._write(SubjectVersionsZNode.path(subject), b"")
            self._require(
                self._ctx(context_of(subject)) + SchemaZNode.path(version.schema_id),
                f"{subject} version {version.version} refers to schema {version.schema_id}, which",
            )
            self._write(
                SubjectVersionZNode.path(subject, version.version),
                SubjectVersionZNode.encode(version),
            )

    def remove_version(self, subject: str, version: int) -> None:
        with self._mutation():
            self._write(SubjectVersionZNode.path(subject, version), None)
            if not self._children(SubjectVersionsZNode.path(subject)):
                self._write(SubjectVersionsZNode.path(subject), None)
                self._write(SubjectZNode.path(subject), None)

    # -- compatibility config ------------------------------------------------------------------

    def get_config(self, subject: str | None) -> str | None:
        data = self._read(ConfigZNode.path_of(subject))
        return None if data is None else ConfigZNode.decode(subject, data)

    def put_config(self, subject: str | None, level: str) -> None:
        with self._mutation():
            self._write(ConfigZNode.path_of(subject), ConfigZNode.encode(level))

    def delete_config(self, subject: str | None) -> None:
        with self._mutation():
            self._write(ConfigZNode.path_of(subject), None)

    # -- modes ---------------------------------------------------------------------------------

    def get_mode(self, subject: str | None) -> str | None:
        data = self._read(ModeZNode.path_of(subject))
        return None if data is None else ModeZNode.decode(subject, data)

    def put_mode(self, subject: str | None, mode: str) -> None:
        with self._mutation():
            self._write(ModeZNode.path_of(subject), ModeZNode.encode(mode))

    def delete_mode(self, subject: str | None) -> None:
        with self._mutation():
            self._write(ModeZNode.path_of(subject), None)

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(KazooException, KazooTimeoutError):
            self._zk.stop()
        self._zk.close()
