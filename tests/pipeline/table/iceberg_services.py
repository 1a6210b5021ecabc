"""The services of the Iceberg tests as fixtures: a PostgreSQL server and moto's S3 server per
session (real servers on free ports; a missing one fails under CI=true, else skips), and a
fresh PostgreSQL database per test. ``tests/pipeline/table/conftest.py`` and the load's Iceberg
tests import them (each importing module's session gets one server)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from sluice.testing.ci import in_ci
from sluice.testing.postgres import PostgresServer, postgres_missing
from sluice.testing.s3 import S3Server, s3_missing

__all__ = ["postgres", "postgres_url", "s3_server"]


def _missing(what: str, why: str | None) -> None:
    if why is None:
        return
    message = f"{what} is needed but {why}; `make system-deps` installs it"
    if in_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    _missing("PostgreSQL", postgres_missing())
    server = PostgresServer(tmp_path_factory.mktemp("postgres")).start()
    try:
        yield server
    finally:
        server.remove()


@pytest.fixture
def postgres_url(postgres: PostgresServer) -> str:
    return postgres.create_database(f"catalog_{uuid.uuid4().hex[:10]}")


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    _missing("moto's S3 server", s3_missing())
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    try:
        yield server
    finally:
        server.stop()
