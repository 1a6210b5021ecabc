"""Fixtures: a real registry process on a free port, and clients for it.

``registry_url`` is one registry for the whole session (tests use distinct subjects);
``start_registry`` starts private ones (:class:`~sluice.testing.registry.RegistryProcess`) for
restart and lock tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.schemas.client import RegistryClient
from sluice.testing.registry import RegistryProcess


@pytest.fixture(scope="session")
def registry_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base = tmp_path_factory.mktemp("registry")
    process = RegistryProcess(base / "data", base / "registry.log").start()
    yield process.url
    status = process.stop()
    assert status == 0, f"registry exited with {status}:\n{process.log()}"


@pytest.fixture
def start_registry(tmp_path: Path) -> Iterator[Callable[..., RegistryProcess]]:
    """``start_registry(name)``: a private registry process on ``tmp_path/name`` (stopped at
    teardown if the test did not stop it). Calling it again with a name reuses that data dir."""
    started: list[RegistryProcess] = []

    def start(name: str, *, wait: bool = True) -> RegistryProcess:
        process = RegistryProcess(tmp_path / name, tmp_path / f"{name}.log")
        started.append(process.start(wait=wait))
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def client(registry_url: str) -> Iterator[RegistryClient]:
    with RegistryClient(registry_url) as c:
        yield c


@pytest.fixture
def subject(request: pytest.FixtureRequest) -> str:
    """A subject name unique to the test (the session registry is shared)."""
    return f"{request.node.name}-value".replace("[", "-").replace("]", "")
