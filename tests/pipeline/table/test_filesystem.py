"""Tests for sluice.pipeline.table.filesystem: the load's one publish call (``HadoopRenamer``)
on ``file://`` with a real JVM; what Hadoop's own local rename does with a target that exists
(refused when its look-up sees it, copied *into* when it appears after the look-up — why
``file://`` goes to the kernel's no-replace rename, which lets exactly one of two racing
publishers win); ``hdfs://`` URIs reaching the ``FileContext`` call; object stores refused."""

from __future__ import annotations

import threading
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


def test_an_hdfs_table_publishes_through_the_filecontext_rename(tmp_path: Path) -> None:
    jvm = _Recorder()
    renamer = HadoopRenamer(jvm, jvm, hadoop_conf=None)
    # pyarrow's hdfs needs libhdfs; the rename does not touch it, so a local stand-in serves.
    fs = TableFileSystem(pafs.LocalFileSystem(), "hdfs://nn:8020", renamer)
    fs.rename_noreplace("/w/_staging/events/1-r1", "/w/events/load=1")
    assert jvm.calls == [
        ("hdfs://nn:8020/w/_staging/events/1-r1", "hdfs://nn:8020/w/events/load=1", ["NONE"])
    ]
    # file:// tables and plain paths go to the kernel's no-replace rename, not to the JVM.
    for prefix, src, dst in [("file://", "a", "b"), ("", "b", "c")]:
        (tmp_path / src).mkdir(exist_ok=True)
        local = TableFileSystem(pafs.LocalFileSystem(), prefix, renamer)
        local.rename_noreplace(str(tmp_path / src), str(tmp_path / dst))
        assert (tmp_path / dst).is_dir() and not (tmp_path / src).exists()
    assert len(jvm.calls) == 1


# --------------------------------------------------------------------------------------------
# Hadoop's local rename with an existing target, and the kernel's
# --------------------------------------------------------------------------------------------


def _dirs(tmp_path: Path, target_empty: bool) -> tuple[Path, Path]:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    (src / "new").write_text("new")
    dst.mkdir()
    if not target_empty:
        (dst / "old").write_text("old")
    return src, dst


@pytest.mark.parametrize("target_empty", [False, True], ids=["non-empty", "empty"])
def test_hadoops_filecontext_rename_refuses_a_target_its_lookup_sees(
    spark: Any, tmp_path: Path, target_empty: bool
) -> None:
    """``FileContext.rename(src, dst, Rename.NONE)`` on ``file://`` — the JVM call the load
    makes on ``hdfs://`` — refuses an existing directory, empty or not, and moves nothing."""
    src, dst = _dirs(tmp_path, target_empty)
    renamer = HadoopRenamer.from_spark(spark)
    with pytest.raises(TargetExistsError):
        renamer.hadoop_rename(f"file://{src}", f"file://{dst}")
    assert sorted(p.name for p in dst.iterdir()) == ([] if target_empty else ["old"])
    assert (src / "new").read_text() == "new"
    renamer.hadoop_rename(f"file://{src}", f"file://{tmp_path / 'moved'}")
    assert (tmp_path / "moved" / "new").read_text() == "new" and not src.exists()


@pytest.mark.parametrize("target_empty", [False, True], ids=["non-empty", "empty"])
def test_hadoops_local_rename_after_its_lookup_does_not_refuse_a_target(
    spark: Any, tmp_path: Path, target_empty: bool
) -> None:
    """The step ``FileContext.rename`` takes once its look-up found no target:
    ``RawLocalFileSystem.rename(src, dst)``. A target that appeared in between is not refused:
    a non-empty one gets ``src`` copied *into* it (rename(2) fails, ``FileUtil.copy`` takes
    over), an empty one is replaced by rename(2) — both report success. A loser of a publish
    race through this path would nest its run inside the winner's ``load=<N>``."""
    src, dst = _dirs(tmp_path, target_empty)
    jvm = spark.sparkContext._jvm
    raw = jvm.org.apache.hadoop.fs.FileSystem.getLocal(
        spark.sparkContext._jsc.hadoopConfiguration()
    )
    raw = raw.getRaw()
    assert raw.getClass().getName() == "org.apache.hadoop.fs.RawLocalFileSystem"
    path = jvm.org.apache.hadoop.fs.Path
    assert raw.rename(path(f"file://{src}"), path(f"file://{dst}")) is True
    assert not src.exists()
    found = sorted(str(p.relative_to(dst)) for p in dst.rglob("*") if p.is_file())
    assert found == (["new"] if target_empty else ["old", "src/new"])


@pytest.mark.parametrize("target_empty", [False, True], ids=["non-empty", "empty"])
def test_the_load_renamer_refuses_an_existing_file_target(
    spark: Any, tmp_path: Path, target_empty: bool
) -> None:
    src, dst = _dirs(tmp_path, target_empty)
    with pytest.raises(TargetExistsError):
        HadoopRenamer.from_spark(spark).rename_noreplace(f"file://{src}", f"file://{dst}")
    assert sorted(p.name for p in dst.iterdir()) == ([] if target_empty else ["old"])
    assert (src / "new").read_text() == "new"


def test_exactly_one_of_two_racing_file_publishers_wins(spark: Any, tmp_path: Path) -> None:
    """Two threads rename their own directory onto the same ``load=1`` at once, 300 times.
    Through Hadoop's ``FileContext`` both won in about one attempt in thirty (the loser nested
    in the winner's directory); the load's renamer must let exactly one win every time."""
    renamer = HadoopRenamer.from_spark(spark)

    def publish(src: Path, dst: Path, barrier: threading.Barrier, won: list[Path]) -> None:
        barrier.wait()
        try:
            renamer.rename_noreplace(f"file://{src}", f"file://{dst}")
            won.append(src)
        except TargetExistsError:
            pass

    for attempt in range(300):
        root = tmp_path / str(attempt)
        dst = root / "load=1"
        sources = [root / f"run-{i}" for i in range(2)]
        for i, src in enumerate(sources):
            src.mkdir(parents=True)
            (src / f"_manifest-{i}").write_text(str(i))
        barrier = threading.Barrier(2)
        won: list[Path] = []
        threads = [
            threading.Thread(target=publish, args=(src, dst, barrier, won)) for src in sources
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(won) == 1, f"attempt {attempt}: {len(won)} publishers won"
        winner = sources.index(won[0])
        assert sorted(p.name for p in dst.iterdir()) == [f"_manifest-{winner}"]
        assert (sources[1 - winner] / f"_manifest-{1 - winner}").is_file()


@pytest.mark.parametrize("uri", ["/w", "file:///w", "hdfs://nn:8020/w", "viewfs://c/w"])
def test_filesystems_with_an_atomic_rename_are_accepted(uri: str) -> None:
    check_table_scheme(uri)


@pytest.mark.parametrize("uri", ["s3a://bucket/w", "s3://b/w", "gs://b/w", "abfss://c@a/w"])
def test_object_stores_are_refused(uri: str) -> None:
    with pytest.raises(UnsupportedTableSchemeError, match="atomic directory rename"):
        check_table_scheme(uri)
