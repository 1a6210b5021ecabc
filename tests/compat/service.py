"""The suite's ``test/service.py``, which kafka-python's sdist leaves out: copied there by
``tests.compat.sdist`` (this module is never imported from ``tests.compat``).

``test/integration/fixtures.py`` imports two names from it:

* ``ExternalService(host, port)``: the "child" of a ``KafkaFixture`` built with
  ``external=True`` — what the suite's ``kafka_broker`` fixture builds when ``KAFKA_URI`` is
  set. The broker is already running and someone else stops it, so every lifecycle method is a
  no-op and ``wait_for`` (a pattern in the broker's log) holds at once.
* ``SpawnedService(args, env)``: the suite's own Kafka or ZooKeeper child process. The compat
  run never spawns one — the broker under test is Sluice, started by ``tests.compat.run`` — so
  constructing it raises :class:`SpawnRefusedError`, naming the command it was asked to run.

Not thread-safe, and need not be: the fixtures drive a service from one thread.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

__all__ = ["ExternalService", "SpawnedService"]

log = logging.getLogger(__name__)


class SpawnRefusedError(RuntimeError):
    """The suite tried to spawn its own broker or ZooKeeper; the compat run tests an external
    Sluice broker only (``KAFKA_URI``)."""


class ExternalService:
    """A broker someone else started and will stop, at ``host:port``."""

    def __init__(self, host: str, port: int) -> None:
        log.info("using the external broker at %s:%d", host, port)
        self.host = host
        self.port = port

    def open(self) -> None:
        """Nothing to start: the broker is already running."""

    def close(self) -> None:
        """Nothing to stop: whoever started the broker stops it."""

    def start(self) -> None:
        """Nothing to start: the broker is already running."""

    def stop(self) -> None:
        """Nothing to stop: whoever started the broker stops it."""

    def wait_for(self, pattern: str, timeout: float = 30) -> bool:
        """The broker is up (its starter waited for it), whatever ``pattern`` its log awaits."""
        return True

    def dump_logs(self) -> None:
        """The broker's log is its starter's (``build/compat/<mode>/``), not the suite's."""


class SpawnedService:
    """Refuses to spawn: see :class:`SpawnRefusedError`."""

    def __init__(self, args: Sequence[str] | None = None, env: Mapping[str, str] | None = None):
        raise SpawnRefusedError(
            "expected the suite to use the external broker in KAFKA_URI, "
            f"found a request to spawn {' '.join(args or ['(no command)'])!r}"
        )
