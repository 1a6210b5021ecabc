"""The configuration every ``sluice`` command gives its confluent-kafka clients.

librdkafka writes its own log lines (``%3|...|FAIL|...``) straight to stderr from its threads,
interleaved with the command's output and its one-line error. Commands route them to the
Python logger ``sluice.librdkafka`` instead, which prints nothing unless ``sluice --debug``
attached a handler (``sluice.cli.main`` does), so a failure reads as one line.
"""

from __future__ import annotations

import logging
from typing import Any

LIBRDKAFKA_LOG = logging.getLogger("sluice.librdkafka")
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.propagate = False

__all__ = ["LIBRDKAFKA_LOG", "client_config", "show_client_logs"]


def client_config(bootstrap: str, **settings: Any) -> dict[str, Any]:
    """``bootstrap.servers`` plus ``settings``, with librdkafka's log routed to Python."""
    return {"bootstrap.servers": bootstrap, "logger": LIBRDKAFKA_LOG, **settings}


def show_client_logs() -> None:
    """Print librdkafka's log lines on stderr (``sluice --debug``)."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("librdkafka: %(message)s"))
    LIBRDKAFKA_LOG.addHandler(handler)
    LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
