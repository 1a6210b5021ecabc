"""Filesystem access for tables: ``pyarrow.fs`` plus the one primitive it lacks.

``TableFileSystem.from_uri`` takes a local path, a ``file://`` URI or an ``hdfs://`` URI and
gives the ``pyarrow.fs`` filesystem, so Parquet files, manifests and directory listings go
through one interface for every scheme. Only the local filesystem is exercised by the tests on
this machine; HDFS goes through the same interface and is untested here.

The commit protocol needs **rename-if-absent of a directory**: move ``src`` to ``dst`` in one
atomic step, or fail because ``dst`` exists. ``pyarrow.fs`` cannot do it on HDFS:
``HadoopFileSystem.move`` calls ``FileSystem.rename(src, dst)``, whose old semantics move
``src`` *into* ``dst`` when ``dst`` is an existing directory (and Arrow deletes an existing file
``dst`` before renaming onto it). So the rename is a separate ``Renamer``:

* ``LocalRenamer`` — Linux ``renameat2(..., RENAME_NOREPLACE)``: one syscall that fails with
  EEXIST if ``dst`` exists. Where the kernel or filesystem lacks it (ENOSYS, EINVAL — NFS, for
  one), ``os.rename``: POSIX rename(2) of a directory is atomic and fails with ENOTEMPTY/EEXIST
  when ``dst`` is a non-empty directory (and replaces an empty one); published run directories
  always hold their manifest, so they are never empty.
* ``HadoopRenamer`` — Hadoop's ``FileContext.rename(src, dst, Options.Rename.NONE)`` through the
  Spark driver's JVM (py4j), for every scheme but the local one. On HDFS this is one namenode
  operation under the namesystem write lock (``Hdfs.renameInternal`` → ``FSDirRenameOp``):
  atomic, and it throws ``FileAlreadyExistsException`` when ``dst`` exists. On ``file://``
  URIs and plain paths it uses ``LocalRenamer`` instead, because Hadoop's local rename is *not*
  a rename-if-absent: ``LocalFs`` → ``DelegateToFileSystem`` → ``FileSystem.rename(src, dst,
  NONE)`` first looks ``dst`` up (``FileAlreadyExistsException`` if present) and only then
  calls ``RawLocalFileSystem.rename``, which is ``File.renameTo`` (rename(2)) and, when that
  fails — as it does for a non-empty ``dst`` that appeared since the look-up — falls back to
  ``FileUtil.copy(src → dst)``, which copies ``src`` *into* the existing directory as
  ``dst/<name of src>`` and deletes ``src``. Two publishers racing for ``load=<N>`` then both
  "succeed", the loser's run nested inside the winner's (``tests/pipeline/table/
  test_filesystem.py`` shows each step; two threads racing through ``FileContext.rename`` both
  won 11 times in 300 on the development machine). An
  empty ``dst`` is replaced by that rename(2) all the same. (On ``viewfs://`` the rename is
  that of the mount's target filesystem; object stores are refused below.)

``TableFileSystem.from_uri`` picks ``LocalRenamer`` for the local filesystem; for any other
scheme pass a renamer (``HadoopRenamer.from_spark(spark)``), or ``rename_noreplace`` raises
``UnsupportedRenameError`` rather than fall back to a check-then-rename race. The nightly load
passes ``HadoopRenamer`` for **every** scheme, ``file://`` included: one publish call, which on
``hdfs://`` goes through the JVM's ``FileContext`` and on ``file://`` through the kernel's
no-replace rename; ``HadoopRenamer.hadoop_rename`` (the JVM call alone) is exercised on
``file://`` by the tests. Instances hold no state beyond the filesystem handle and are as
thread-safe as it is.

Which schemes a table may live on (``check_table_scheme``)
==========================================================
The commit is one rename, so a table needs a filesystem whose directory rename is atomic and
fails on an existing target: ``file`` (rename(2) within one filesystem) and ``hdfs`` /
``viewfs`` (one namenode operation). Object stores (``s3a``, ``s3``, ``gs``, ``abfs``,
``wasb``, ``oss``...) have no directory rename at all — Hadoop's connectors emulate it by
copying and deleting object by object, so readers can see half a run and two writers can both
"win". Tables there need a commit built on the store's own conditional write (a table format
such as Iceberg or Delta commits one metadata object with put-if-absent); Sluice refuses them
with ``UnsupportedTableSchemeError`` instead of publishing non-atomically.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import pyarrow.fs as pafs

__all__ = [
    "ATOMIC_RENAME_SCHEMES",
    "HadoopRenamer",
    "LocalRenamer",
    "Renamer",
    "TableFileSystem",
    "TargetExistsError",
    "UnsupportedRenameError",
    "UnsupportedTableSchemeError",
    "check_table_scheme",
]

ATOMIC_RENAME_SCHEMES = ("file", "hdfs", "viewfs")
"""URI schemes whose directory rename is atomic and refuses an existing target (module doc)."""


class TargetExistsError(FileExistsError):
    """``rename_noreplace`` found its destination already present; nothing was moved."""


class UnsupportedRenameError(RuntimeError):
    """No atomic rename-if-absent is configured for this filesystem."""


class UnsupportedTableSchemeError(ValueError):
    """A table URI names a filesystem without an atomic directory rename (an object store)."""


def check_table_scheme(uri: str) -> None:
    """Raise ``UnsupportedTableSchemeError`` unless ``uri`` is a local path or a URI of one of
    ``ATOMIC_RENAME_SCHEMES``; the message says why object stores are refused."""
    scheme = urlsplit(uri).scheme.lower()
    if scheme and scheme not in ATOMIC_RENAME_SCHEMES:
        raise UnsupportedTableSchemeError(
            f"{uri}: expected a filesystem with an atomic directory rename "
            f"({', '.join(s + '://' for s in ATOMIC_RENAME_SCHEMES)} or a local path), found "
            f"{scheme}://; object stores copy and delete object by object instead of renaming, "
            "so a run could be seen half-published; keep the table on HDFS or a local/shared "
            "disk"
        )


class Renamer(Protocol):
    """Atomically rename directory ``src`` to ``dst`` or raise ``TargetExistsError``."""

    def rename_noreplace(self, src: str, dst: str) -> None: ...


_AT_FDCWD = -100
_RENAME_NOREPLACE = 1


class LocalRenamer:
    """Rename-if-absent on a local filesystem (paths, not URIs). Thread-safe."""

    def __init__(self) -> None:
        self._renameat2: Any = None
        name = ctypes.util.find_library("c")
        if name:
            libc = ctypes.CDLL(name, use_errno=True)
            self._renameat2 = getattr(libc, "renameat2", None)

    def rename_noreplace(self, src: str, dst: str) -> None:
        if self._renameat2 is not None:
            result = self._renameat2(
                _AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE
            )
            if result == 0:
                return
            code = ctypes.get_errno()
            if code == errno.EEXIST:
                raise TargetExistsError(code, "rename target exists", dst)
            if code not in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
                raise OSError(code, os.strerror(code), src)
        try:
            os.rename(src, dst)
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise TargetExistsError(exc.errno, "rename target exists", dst) from None
            raise


class HadoopRenamer:
    """Rename-if-absent through Hadoop's ``FileContext`` in the Spark driver's JVM — except on
    the local filesystem, where Hadoop's rename is check-then-rename (module doc) and the
    kernel's no-replace rename (``local``, default ``LocalRenamer``) is used instead.

    ``src`` and ``dst`` are full URIs (``hdfs://namenode:8020/...``, ``file:///w/...``) or
    plain local paths. Not thread-safe beyond what py4j offers (one gateway call at a time is
    fine); the local rename is thread-safe.
    """

    def __init__(
        self, jvm: Any, gateway: Any, hadoop_conf: Any, local: Renamer | None = None
    ) -> None:
        self._jvm = jvm
        self._gateway = gateway
        self._conf = hadoop_conf
        self._local = local if local is not None else LocalRenamer()

    @classmethod
    def from_spark(cls, spark: Any) -> HadoopRenamer:
        sc = spark.sparkContext
        return cls(sc._jvm, sc._gateway, sc._jsc.hadoopConfiguration())

    def rename_noreplace(self, src: str, dst: str) -> None:
        local_src, local_dst = _local_path(src), _local_path(dst)
        if local_src is not None and local_dst is not None:
            self._local.rename_noreplace(local_src, local_dst)
        else:
            self.hadoop_rename(src, dst)

    def hadoop_rename(self, src: str, dst: str) -> None:
        """``FileContext.rename(src, dst, Rename.NONE)`` for any scheme (plain paths are taken
        as ``file://``); ``TargetExistsError`` when Hadoop reports ``dst`` as existing. Atomic
        rename-if-absent only where the scheme's ``AbstractFileSystem`` makes it one (HDFS);
        on ``file://`` a look-up, then rename(2) with a copy fallback (module doc)."""
        from py4j.protocol import Py4JJavaError

        src, dst = _as_uri(src), _as_uri(dst)
        fs_pkg = self._jvm.org.apache.hadoop.fs
        rename_enum = getattr(fs_pkg, "Options$Rename")
        options = self._gateway.new_array(rename_enum, 1)
        options[0] = rename_enum.NONE
        src_path, dst_path = fs_pkg.Path(src), fs_pkg.Path(dst)
        context = fs_pkg.FileContext.getFileContext(src_path.toUri(), self._conf)
        try:
            context.rename(src_path, dst_path, options)
        except Py4JJavaError as exc:
            name = exc.java_exception.getClass().getName()
            if name == "org.apache.hadoop.fs.FileAlreadyExistsException":
                raise TargetExistsError(errno.EEXIST, "rename target exists", dst) from None
            raise


def _local_path(path: str) -> str | None:
    """The local path of a plain path or a ``file:`` URI; ``None`` for any other scheme."""
    parts = urlsplit(path)
    if not parts.scheme:
        return os.path.abspath(path)
    if parts.scheme.lower() == "file" and parts.netloc in ("", "localhost"):
        return parts.path
    return None


def _as_uri(path: str) -> str:
    """A plain local path as a ``file://`` URI; URIs pass through."""
    return path if urlsplit(path).scheme else "file://" + os.path.abspath(path)


@dataclass(frozen=True)
class TableFileSystem:
    """A ``pyarrow.fs`` filesystem, the URI prefix of its paths, and its renamer.

    Paths handed to the methods are the filesystem's own (``/warehouse/t``); ``uri(path)``
    turns one back into what Spark and the caller passed in (``file:///warehouse/t``,
    ``hdfs://nn:8020/warehouse/t`` or a plain local path).
    """

    fs: pafs.FileSystem
    prefix: str  # "" for plain local paths, "file://" or "hdfs://host:port" otherwise
    renamer: Renamer | None

    @classmethod
    def from_uri(cls, uri: str, renamer: Renamer | None = None) -> tuple[TableFileSystem, str]:
        """The filesystem of ``uri`` and the path of ``uri`` on it (normalized, no slash)."""
        parts = urlsplit(uri)
        if not parts.scheme:
            path = os.path.abspath(uri)
            return cls(pafs.LocalFileSystem(), "", renamer or LocalRenamer()), path
        fs, path = pafs.FileSystem.from_uri(uri)
        path = path.rstrip("/") or "/"
        if isinstance(fs, pafs.LocalFileSystem):
            return cls(fs, "file://", renamer or LocalRenamer()), os.path.normpath(path)
        prefix = f"{parts.scheme}://{parts.netloc}"
        return cls(fs, prefix, renamer), path

    def uri(self, path: str) -> str:
        return self.prefix + path

    # -- queries --------------------------------------------------------------------------

    def exists(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type != pafs.FileType.NotFound)

    def is_dir(self, path: str) -> bool:
        return bool(self.fs.get_file_info(path).type == pafs.FileType.Directory)

    def list_dir(self, path: str) -> list[pafs.FileInfo]:
        """Entries directly under ``path``; empty when it does not exist."""
        if not self.is_dir(path):
            return []
        return list(self.fs.get_file_info(pafs.FileSelector(path, recursive=False)))

    def walk_files(self, path: str) -> list[tuple[str, int]]:
        """(path relative to ``path``, size) of every file below ``path``, sorted."""
        selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
        base = path.rstrip("/") + "/"
        return sorted(
            (info.path[len(base) :], int(info.size or 0))
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        )

    def file_size(self, path: str) -> int | None:
        info = self.fs.get_file_info(path)
        return int(info.size or 0) if info.type == pafs.FileType.File else None

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as stream:
            return bytes(stream.read())

    # -- changes --------------------------------------------------------------------------

    def write_bytes(self, path: str, data: bytes) -> None:
        with self.fs.open_output_stream(path) as stream:
            stream.write(data)

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def delete_dir(self, path: str) -> None:
        """Delete ``path`` and everything below it; no error when it is already gone."""
        if self.exists(path):
            self.fs.delete_dir(path)

    def rename_noreplace(self, src: str, dst: str) -> None:
        """Atomically move directory ``src`` to ``dst``; ``TargetExistsError`` if ``dst`` exists."""
        if self.renamer is None:
            raise UnsupportedRenameError(
                f"{self.prefix or 'file://'}: expected a Renamer with an atomic rename-if-absent "
                "(HadoopRenamer.from_spark(spark) for hdfs://), found none"
            )
        if self.prefix and not self.prefix.startswith("file://"):
            self.renamer.rename_noreplace(self.uri(src), self.uri(dst))
        else:
            self.renamer.rename_noreplace(src, dst)
