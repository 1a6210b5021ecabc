"""Fixtures of the Iceberg tests: a SQLite catalog per test, a PostgreSQL server and an S3
stand-in per session (``iceberg_services``: real servers on free ports; missing ones fail
under CI=true)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pipeline.table.iceberg_services import postgres, postgres_url, s3_server

__all__ = ["postgres", "postgres_url", "s3_server"]


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    return (tmp_path / "warehouse").as_uri()
