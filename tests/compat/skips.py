"""A pytest plugin (``-p tests.compat.skips``): the suite's tests that cannot run against an
external broker, skipped with the reason.

The suite itself skips what an external broker cannot serve when ``KAFKA_URI`` is set (the
SASL tests) or what the version under test lacks (``KAFKA_VERSION``); this plugin adds only
the tests that have no such switch. Each entry is a node-id prefix, relative to the sdist's
root (pytest's rootdir there), and the reason shown in the report:

* ``test_ssl_integration.py::TestSSLConnection``: its module fixture starts the suite's own
  SSL Kafka broker, whatever ``KAFKA_URI`` says — against Sluice it would only meet
  ``SpawnedService`` refusing to spawn.

The skip marker is added at collection, so the skipped tests' fixtures never run. Loaded once
per pytest process; stateless.
"""

from __future__ import annotations

import pytest

__all__ = ["SKIPS"]

SKIPS: dict[str, str] = {
    "test/integration/test_ssl_integration.py::TestSSLConnection::": (
        "spawns its own SSL broker (no KAFKA_URI switch)"
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every collected test under a :data:`SKIPS` prefix to be skipped."""
    for item in items:
        for prefix, reason in SKIPS.items():
            if item.nodeid.startswith(prefix):
                item.add_marker(pytest.mark.skip(reason=reason))
