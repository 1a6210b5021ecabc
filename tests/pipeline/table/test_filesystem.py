"""Tests for sluice.pipeline.table.filesystem: the one publish path — the no-replace rename
through the JVM's Hadoop ``FileContext`` — on ``file://`` with a real JVM, ``hdfs://`` URIs
reaching the same call, and object stores refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.fs as pafs
import pytest

from sluice.pipeline.source.ranges import OffsetRange
from sluice.pipeline.table.commit import TableWriter
from sluice.pipeline.table.filesystem import (
    HadoopRenamer,
    TableFileSystem,
    TargetExistsError,
    UnsupportedTableSchemeError,
    check_table_scheme,
)
from sluice.pipeline.table.manifest import RangeRecord


def test_the_hadoop_rename_publishes_a_file_table_and_refuses_an_existing_target(
    spark: Any, tmp_path: Path
) -> None:
    writer = TableWriter(f"file://{tmp_path}/events", HadoopRenamer.from_spark(spark))
    assert isinstance(writer.fs.renamer, HadoopRenamer)
    staged = writer.begin("r1", None)
    staged.write_manifest(staged.manifest([RangeRecord(OffsetRange("t", 0, 0, 0), 0, 0)], []))
    published = staged.publish()
    assert (tmp_path / "events" / "load=1" / "_manifest.json").is_file()
    assert published.uri == f"file://{tmp_path}/events/load=1"

    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "a").mkdir(parents=True)
    (dst / "b").mkdir(parents=True)
    with pytest.raises(TargetExistsError):
        HadoopRenamer.from_spark(spark).rename_noreplace(str(src), f"file://{dst}")
    assert (src / "a").is_dir() and not (dst / "src").exists()  # nothing moved into dst


class _Recorder:
    """A stand-in for the py4j JVM view: records the FileContext rename it is asked for."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, list[str]]] = []
        outer = self

        class Path_:
            def __init__(self, uri: str) -> None:
                self.uri = uri

            def toUri(self) -> str:  # noqa: N802 - the Java name
                return self.uri

        class Context:
            def rename(self, src: Path_, dst: Path_, options: list[str]) -> None:
                outer.calls.append((src.uri, dst.uri, list(options)))

        class FileContext:
            @staticmethod
            def getFileContext(uri: str, conf: Any) -> Context:  # noqa: N802
                return Context()

        class Rename:
            NONE = "NONE"

        self.fs = type(
            "fs", (), {"Path": Path_, "FileContext": FileContext, "Options$Rename": Rename}
        )
        self.org = type(
            "org", (), {"apache": type("a", (), {"hadoop": type("h", (), {"fs": self.fs})})}
        )

    def new_array(self, kind: Any, size: int) -> list[Any]:
        return [None] * size


def test_an_hdfs_table_publishes_through_the_same_filecontext_rename(tmp_path: Path) -> None:
    jvm = _Recorder()
    renamer = HadoopRenamer(jvm, jvm, hadoop_conf=None)
    # pyarrow's hdfs needs libhdfs; the rename does not touch it, so a local stand-in serves.
    fs = TableFileSystem(pafs.LocalFileSystem(), "hdfs://nn:8020", renamer)
    fs.rename_noreplace("/w/_staging/events/1-r1", "/w/events/load=1")
    assert jvm.calls == [
        ("hdfs://nn:8020/w/_staging/events/1-r1", "hdfs://nn:8020/w/events/load=1", ["NONE"])
    ]
    # file:// tables reach the very same call, with file:// URIs.
    TableFileSystem(pafs.LocalFileSystem(), "file://", renamer).rename_noreplace("/a", "/b")
    assert jvm.calls[-1] == ("file:///a", "file:///b", ["NONE"])


@pytest.mark.parametrize("uri", ["/w", "file:///w", "hdfs://nn:8020/w", "viewfs://c/w"])
def test_filesystems_with_an_atomic_rename_are_accepted(uri: str) -> None:
    check_table_scheme(uri)


@pytest.mark.parametrize("uri", ["s3a://bucket/w", "s3://b/w", "gs://b/w", "abfss://c@a/w"])
def test_object_stores_are_refused(uri: str) -> None:
    with pytest.raises(UnsupportedTableSchemeError, match="atomic directory rename"):
        check_table_scheme(uri)
