"""The registry's ASGI app in this process, over a file store, behind Starlette's TestClient."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from starlette.testclient import TestClient

from sluice.schemas.app import create_app
from sluice.schemas.file_store import FileSchemaStore
from sluice.schemas.limits import RegistryLimits
from sluice.schemas.registry import Registry


@contextlib.contextmanager
def in_process_registry(data_dir: Path, limits: RegistryLimits) -> Iterator[TestClient]:
    """A client of a fresh registry in ``data_dir``; server errors come back as 500s, not
    raised, so that tests see what a remote client would."""
    store = FileSchemaStore(data_dir)
    try:
        with TestClient(create_app(Registry(store), limits), raise_server_exceptions=False) as c:
            yield c
    finally:
        store.close()
