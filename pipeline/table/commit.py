"""The commit protocol: a load run's Parquet files and offsets manifest appear in one rename.

Layout
======
::

    <parent>/<name>/                                   the table; readers point here
        load=1/_manifest.json                          run 1's offsets manifest
        load=1/topic=<t>/date=<yyyy-mm-dd>/part-*.parquet
        load=2/...
    <parent>/_staging/<name>/<sequence>-<run id>/      a run being written (outside the table)
        _manifest.json
        topic=<t>/date=<yyyy-mm-dd>/part-*.parquet

A run writes all its files — every topic and date it read — into its staging directory, in the
final relative layout, writes ``_manifest.json`` (``sluice.pipeline.table.manifest``) last, and
publishes by
**one directory rename**, ``_staging/<name>/<N>-<run id>`` → ``<name>/load=<N>``. Readers see
hive partitions ``load``, ``topic``, ``date``:

* ``spark.read.parquet(table)`` (partition discovery) and ``pyarrow.dataset.dataset(table,
  partitioning="hive")`` skip files and directories whose names start with ``_`` or ``.``, so
  ``_manifest.json``, Spark's ``_SUCCESS`` and Hadoop's ``.crc`` files are invisible to them.
* duckdb's ``read_parquet('<table>/**/*.parquet', hive_partitioning=true)`` does **not** skip
  ``_`` or ``.`` directories (checked with duckdb 2.0: ``**`` descends into ``_staging`` and
  ``.hidden``). That is why staging lives *beside* the table rather than in ``<table>/_staging``:
  nothing under ``<table>`` is ever partial. It must be on the same filesystem as the table
  (a sibling directory almost always is; a table that is itself a mount point is not supported).

``load=<N>`` is the run's **sequence number**: 1 for a table's first run, and each run takes
the newest published sequence plus one. The number doubles as an incrementally readable
partition column (``WHERE load > 41``); the run id is in the manifest and in no path the readers
parse.

Why the rename is the whole commit
==================================
* **Atomic publish.** On ``file://`` the rename is rename(2) of a directory within one
  filesystem — atomic: every reader's directory listing has all of ``load=<N>`` or none of it.
  On ``hdfs://`` it is one namenode operation (``FileContext.rename`` with
  ``Options.Rename.NONE``, see ``sluice.pipeline.table.filesystem``), atomic for every client.
  Nothing under ``<table>`` is ever modified or deleted after it appears.
* **Conflicts.** The rename target is a function of the sequence alone, so the rename is a
  compare-and-swap on "the newest run is still the one I started after", as in pyiceberg's
  ``expected X, found Y`` commit. ``publish`` first checks that the newest published run is the
  one ``begin`` saw (the cheap, early check), then renames *without replacing*, in one step
  that refuses an existing target: on a local filesystem Linux
  ``renameat2(RENAME_NOREPLACE)`` (fallback ``os.rename``, which fails on a non-empty target —
  and a published directory always holds its manifest), on HDFS the namenode's rename with
  ``Rename.NONE`` (``FileAlreadyExistsException``). Of two loads that started after the same
  run, exactly one rename succeeds; the other raises ``CommitConflictError`` with the expected
  and found runs. (Hadoop's own *local* rename would not do: it looks the target up, then
  renames, and when a competitor's directory appeared in between it copies the run *into* it —
  which is why ``HadoopRenamer`` hands ``file://`` to the kernel; see the filesystem module.)
  No lock files, so a killed process never leaves a lock behind.
* **Resume.** The newest ``load=<N>/_manifest.json`` holds the full resume position
  (``offsets``); ``latest_committed_offsets`` returns it in Spark's offsets JSON shape.
* **Crashes.** Before the rename, a crash leaves only a staging directory: the table is the old
  state. After it, the table is the new state; the rename carried the manifest, so the next run
  resumes after this run's offsets and loads no row twice. ``begin`` and ``publish`` delete
  staging directories whose sequence is already published (they can never publish); a run
  re-begun under the same run id replaces its own leftover staging directory. A staging
  directory whose sequence is still free is left alone — it may belong to a live competitor —
  until a run takes that sequence.

Writers
=======
``TableWriter(table_uri).begin(run_id, expected_previous_run)`` returns a ``StagedRun``.
Write Parquet under ``staged.uri`` (e.g. ``df.write.mode("append").partitionBy("topic",
"date").parquet(staged.uri)``), list what was written with ``staged.data_files()``, build a
``Manifest`` (``staged.manifest(...)`` fills in the identity fields), ``staged.write_manifest``
it, then ``staged.publish()``; or ``staged.abort()``. ``publish`` validates before renaming:
the manifest is present and decodes, names this run, and lists exactly the Parquet files in the
staging directory with their sizes. A ``TableWriter`` and its ``StagedRun`` objects are meant
for one thread; separate writers (threads, processes, hosts) coordinate only through the
filesystem as described above.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow.parquet as pq

from sluice.pipeline.source.ranges import DataLoss
from sluice.pipeline.table.filesystem import Renamer, TableFileSystem, TargetExistsError
from sluice.pipeline.table.manifest import (
    DataFile,
    ErrorCount,
    InvalidManifestError,
    Manifest,
    RangeRecord,
    RowCount,
    merge_offsets,
    valid_run_id,
)

__all__ = [
    "MANIFEST_NAME",
    "CommitConflictError",
    "CorruptTableError",
    "InvalidRunIdError",
    "PublishedRun",
    "RunAlreadyPublishedError",
    "StagedRun",
    "StagingValidationError",
    "TableWriter",
    "cleanup_staging",
    "latest_committed_offsets",
    "latest_manifest",
    "published_runs",
]

MANIFEST_NAME = "_manifest.json"
_LOAD = "load="


class CommitConflictError(RuntimeError):
    """Another run published first; the message says which run was expected and found."""


class RunAlreadyPublishedError(CommitConflictError):
    """``begin`` was asked to start a run that is already the newest published run.

    A job retried after a crash that came right after its rename sees this: its work is done.
    """


class StagingValidationError(RuntimeError):
    """The staged run is not publishable (no manifest, or files differ from the manifest)."""


class CorruptTableError(RuntimeError):
    """A published directory breaks the layout (no manifest, or a bad ``load=`` name)."""


class InvalidRunIdError(ValueError):
    """A run id is not a safe path segment."""


@dataclass(frozen=True, slots=True)
class PublishedRun:
    """One ``load=<sequence>`` directory of the table."""

    sequence: int
    path: str  # on the filesystem
    uri: str


def _is_hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


class TableWriter:
    """Commit protocol for the table at ``table_uri`` (local path, ``file://`` or ``hdfs://``).

    ``renamer`` is required for non-local filesystems (``HadoopRenamer.from_spark(spark)``).
    """

    def __init__(self, table_uri: str, renamer: Renamer | None = None) -> None:
        self.fs, self.path = TableFileSystem.from_uri(table_uri, renamer)
        parent, name = posixpath.split(self.path.rstrip("/"))
        if not name:
            raise ValueError(f"table: expected a directory below the root, found {table_uri!r}")
        self.name = name
        self.uri = self.fs.uri(self.path)
        self.staging_root = posixpath.join(parent, "_staging", name)

    # -- reading the published state ------------------------------------------------------

    def published_runs(self) -> list[PublishedRun]:
        """Every published run, oldest first. Lists one directory; reads no manifest."""
        runs = []
        for info in self.fs.list_dir(self.path):
            if not info.base_name.startswith(_LOAD):
                continue
            number = info.base_name[len(_LOAD) :]
            if not (number.isascii() and number.isdigit() and int(number) >= 1):
                raise CorruptTableError(
                    f"{self.fs.uri(info.path)}: expected load=<sequence >= 1>, "
                    f"found {info.base_name!r}"
                )
            runs.append(PublishedRun(int(number), info.path, self.fs.uri(info.path)))
        return sorted(runs, key=lambda r: r.sequence)

    def read_manifest(self, run: PublishedRun) -> Manifest:
        path = posixpath.join(run.path, MANIFEST_NAME)
        if not self.fs.exists(path):
            raise CorruptTableError(f"{run.uri}: expected {MANIFEST_NAME}, found none")
        return Manifest.decode(self.fs.read_bytes(path))

    def latest_manifest(self) -> Manifest | None:
        """The newest published run's manifest, or ``None`` for a table without runs."""
        runs = self.published_runs()
        return self.read_manifest(runs[-1]) if runs else None

    def latest_committed_offsets(self) -> dict[str, dict[int, int]]:
        """``{topic: {partition: offset}}`` to resume from; ``{}`` for a new table."""
        manifest = self.latest_manifest()
        return {t: dict(ps) for t, ps in manifest.offsets.items()} if manifest else {}

    # -- staging --------------------------------------------------------------------------

    def _staged_dirs(self) -> list[tuple[int, str, str]]:
        found = []
        for info in self.fs.list_dir(self.staging_root):
            number, _, run_id = info.base_name.partition("-")
            if number.isascii() and number.isdigit() and run_id:
                found.append((int(number), run_id, info.path))
        return found

    def cleanup_staging(self) -> list[str]:
        """Delete staged runs that can never publish (their sequence is taken); return URIs."""
        runs = self.published_runs()
        newest = runs[-1].sequence if runs else 0
        removed = []
        for sequence, _, path in self._staged_dirs():
            if sequence <= newest:
                self.fs.delete_dir(path)
                removed.append(self.fs.uri(path))
        return removed

    def begin(self, run_id: str, expected_previous_run: str | None) -> StagedRun:
        """Start run ``run_id`` after ``expected_previous_run`` (``None``: the table is new).

        Raises ``CommitConflictError`` at once when another run is already newest, and its
        subclass ``RunAlreadyPublishedError`` when ``run_id`` itself is.
        """
        if not valid_run_id(run_id):
            raise InvalidRunIdError(
                f"run id: expected 1-200 characters of [A-Za-z0-9._-], found {run_id!r}"
            )
        self.fs.mkdirs(self.path)
        runs = self.published_runs()
        newest = self.read_manifest(runs[-1]) if runs else None
        found = newest.run_id if newest else None
        if newest is not None and found == run_id:
            raise RunAlreadyPublishedError(
                f"table {self.uri}: expected run {run_id!r} not to be published yet, found it "
                f"published as load={newest.sequence}"
            )
        if found != expected_previous_run:
            raise CommitConflictError(
                f"table {self.uri}: expected previous run {expected_previous_run!r}, found "
                f"{found!r}" + (f" (load={newest.sequence})" if newest else "")
            )
        sequence = newest.sequence + 1 if newest else 1
        self.cleanup_staging()
        path = posixpath.join(self.staging_root, f"{sequence}-{run_id}")
        self.fs.delete_dir(path)  # our own leftover from a crashed attempt of this run
        self.fs.mkdirs(path)
        previous = dict(newest.offsets) if newest else {}
        return StagedRun(self, run_id, sequence, expected_previous_run, path, previous)


class StagedRun:
    """A run being written; see the module doc. For one thread."""

    def __init__(
        self,
        table: TableWriter,
        run_id: str,
        sequence: int,
        previous_run: str | None,
        path: str,
        previous_offsets: Mapping[str, Mapping[int, int]],
    ) -> None:
        self.table = table
        self.run_id = run_id
        self.sequence = sequence
        self.previous_run = previous_run
        self.path = path
        self.uri = table.fs.uri(path)
        self.previous_offsets = {t: dict(ps) for t, ps in previous_offsets.items()}

    @property
    def target(self) -> str:
        return posixpath.join(self.table.path, f"{_LOAD}{self.sequence}")

    def _parquet_files(self) -> list[tuple[str, int]]:
        return [(p, s) for p, s in self.table.fs.walk_files(self.path) if p.endswith(".parquet")]

    def data_files(self) -> list[DataFile]:
        """Every Parquet file written so far, with its size and row count (from its footer)."""
        files = []
        for relative, size in self._parquet_files():
            if _is_hidden(relative):
                raise StagingValidationError(
                    f"{self.uri}: expected no Parquet file under a '_' or '.' directory "
                    f"(duckdb reads them, Spark and pyarrow do not), found {relative!r}"
                )
            with self.table.fs.fs.open_input_file(posixpath.join(self.path, relative)) as f:
                rows = pq.ParquetFile(f).metadata.num_rows
            files.append(DataFile(relative, size, rows))
        return files

    def manifest(
        self,
        ranges: Sequence[RangeRecord],
        files: Sequence[DataFile] | None = None,
        *,
        row_counts: Iterable[RowCount] = (),
        schema_ids: Mapping[str, Iterable[int]] | None = None,
        data_loss: Iterable[DataLoss] = (),
        error_counts: Iterable[ErrorCount] = (),
    ) -> Manifest:
        """A manifest for this run: identity fields filled in, ``offsets`` = previous + ends.

        ``files`` defaults to ``data_files()`` (which refuses an error table's files: a run
        with ``error_counts`` lists its files itself).
        """
        return Manifest(
            run_id=self.run_id,
            table=self.table.uri,
            sequence=self.sequence,
            previous_run=self.previous_run,
            ranges=tuple(ranges),
            offsets=merge_offsets(self.previous_offsets, (r.range for r in ranges)),
            files=tuple(self.data_files() if files is None else files),
            row_counts=tuple(row_counts),
            schema_ids={t: tuple(ids) for t, ids in (schema_ids or {}).items()},
            data_loss=tuple(data_loss),
            error_counts=tuple(error_counts),
            created=dt.datetime.now(dt.UTC).isoformat(),
        )

    def write_manifest(self, manifest: Manifest) -> None:
        self._check_identity(manifest)
        self.table.fs.write_bytes(posixpath.join(self.path, MANIFEST_NAME), manifest.encode())

    def _check_identity(self, manifest: Manifest) -> None:
        expected = (self.run_id, self.sequence, self.previous_run, self.table.uri)
        found = (manifest.run_id, manifest.sequence, manifest.previous_run, manifest.table)
        if expected != found:
            raise StagingValidationError(
                f"{self.uri}: expected a manifest for (run_id, sequence, previous_run, table) "
                f"= {expected}, found {found}"
            )

    def validate(self) -> Manifest:
        """Check the staged run is publishable; return its manifest (as stored)."""
        fs = self.table.fs
        manifest_path = posixpath.join(self.path, MANIFEST_NAME)
        if not fs.exists(manifest_path):
            raise StagingValidationError(f"{self.uri}: expected {MANIFEST_NAME}, found none")
        # Decoded even when this object just wrote it: decoding checks every field's type,
        # which building a Manifest does not, and a manifest published that the next run
        # cannot read would stop the table.
        manifest = Manifest.decode(fs.read_bytes(manifest_path))
        self._check_identity(manifest)
        listed = {f.path: f.size for f in manifest.files}
        present = dict(self._parquet_files())
        if listed != present:
            missing = sorted(set(listed) - set(present))
            unlisted = sorted(set(present) - set(listed))
            resized = sorted(p for p in set(listed) & set(present) if listed[p] != present[p])
            raise StagingValidationError(
                f"{self.uri}: expected the Parquet files of {MANIFEST_NAME} with their sizes, "
                f"found missing={missing}, unlisted={unlisted}, "
                f"different size={[(p, listed[p], present[p]) for p in resized]}"
            )
        return manifest

    def _check_slot_free(self) -> None:
        """Raise ``CommitConflictError`` if some run already took this run's sequence."""
        table = self.table
        runs = table.published_runs()
        if runs and runs[-1].sequence >= self.sequence:
            taken = next(r for r in runs if r.sequence >= self.sequence)
            winner = table.read_manifest(taken)
            raise CommitConflictError(
                f"table {table.uri}: expected previous run {self.previous_run!r}, found "
                f"{winner.run_id!r} published as load={winner.sequence} first"
            )

    def publish(self) -> PublishedRun:
        """Validate, then publish with one rename; ``CommitConflictError`` if beaten to it.

        The winner of a race deletes the loser's staging directory as a dead end, possibly
        while the loser validates or renames; the loser then still gets ``CommitConflictError``.
        """
        table = self.table
        self._check_slot_free()
        try:
            self.validate()
        except (StagingValidationError, InvalidManifestError, OSError):
            self._check_slot_free()
            raise
        try:
            table.fs.rename_noreplace(self.path, self.target)
        except TargetExistsError:
            self._check_slot_free()
            raise  # unreachable unless load=<N> vanished again: not ours to explain
        except OSError:
            self._check_slot_free()
            raise
        published = PublishedRun(self.sequence, self.target, table.fs.uri(self.target))
        with contextlib.suppress(OSError):  # best effort: the next run cleans up too
            table.cleanup_staging()
        return published

    def abort(self) -> None:
        """Delete the staging directory; the table is untouched."""
        self.table.fs.delete_dir(self.path)


# -- module-level conveniences ------------------------------------------------------------


def published_runs(table_uri: str) -> list[PublishedRun]:
    return TableWriter(table_uri).published_runs()


def latest_manifest(table_uri: str) -> Manifest | None:
    return TableWriter(table_uri).latest_manifest()


def latest_committed_offsets(table_uri: str) -> dict[str, dict[int, int]]:
    return TableWriter(table_uri).latest_committed_offsets()


def cleanup_staging(table_uri: str) -> list[str]:
    return TableWriter(table_uri).cleanup_staging()
