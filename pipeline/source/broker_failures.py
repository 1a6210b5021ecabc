"""librdkafka's complaints about brokers it cannot reach, counted per broker instead of streamed.

A consumer whose broker is down makes librdkafka log ``FAIL ... Connect to ipv4#host:port
failed`` on stderr at every reconnect attempt — thousands of lines per executor in a few
minutes, none of them saying what the job is waiting for — and report the same failures to the
``error_cb`` (or, without one, as error events from ``consume()``). ``BrokerFailures`` takes
both channels: ``settings()`` adds a ``logger`` (a non-propagating ``logging.Logger`` whose
handler counts) and an ``error_cb`` to a consumer's settings, so nothing reaches stderr, and
``summary()`` says in one line which brokers failed and how often::

    127.0.0.1:9092 (412 connection failures: Connection refused)

The broker is the ``host:port`` librdkafka names at the start of its message
(``host:port/<id or bootstrap>: ...``); lines that name none count under ``"(cluster)"``.
Other log lines at warning level or worse are kept (the last few) for the same summary. A fatal
error (``KafkaError.fatal()``) is kept as ``fatal`` for the caller to raise.

Callbacks run on the thread that polls the consumer (librdkafka serves logs and errors from
``consume()``/``poll()``), so one ``BrokerFailures`` belongs to one consumer's thread; reading
the counts from another thread sees a consistent-enough snapshot (ints and a dict, written
under the GIL) but no lock is taken.
"""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError

__all__ = ["BrokerFailures"]

# "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused (...)"
_BROKER = re.compile(r"(?P<broker>[^\s/\[\]]+:\d+)/[^:\s]+: (?P<what>.*)")
_CONNECT = re.compile(r"Connect to \S+ failed: (?P<reason>[^(]+?)\s*(\(|$)")
_TRANSPORT_WORDS = ("Connect to", "Disconnected", "Connection refused", "timed out")
# librdkafka's own tally ("1/1 brokers are down"): the per-broker counts already say it.
_TALLY = re.compile(r"^\d+/\d+ brokers are down$")

_ids = itertools.count()


class _CountingHandler(logging.Handler):
    def __init__(self, owner: BrokerFailures) -> None:
        super().__init__(logging.DEBUG)
        self.owner = owner

    def emit(self, record: logging.LogRecord) -> None:
        self.owner.note(record.getMessage(), record.levelno)


class BrokerFailures:
    """Connection failures per broker of one consumer (see the module doc)."""

    def __init__(self) -> None:
        self.by_broker: dict[str, int] = {}
        self.reasons: dict[str, str] = {}
        self.other: list[str] = []
        self.fatal: KafkaError | None = None
        # A logger of its own per instance: librdkafka's handle keeps a reference to it.
        self.logger = logging.getLogger(f"sluice.librdkafka.{next(_ids)}")
        self.logger.propagate = False
        self.logger.setLevel(logging.WARNING)
        self.logger.handlers = [_CountingHandler(self)]

    def settings(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` with this counter as its ``logger`` and ``error_cb``."""
        return {**config, "logger": self.logger, "error_cb": self.on_error}

    def on_error(self, error: KafkaError) -> None:
        if error.fatal():
            self.fatal = error
        self.note(error.str(), logging.ERROR)

    def note(self, message: str, level: int) -> None:
        """Count one log line or error of librdkafka."""
        # A log line is "FAC [rdkafka#consumer-1] [thrd:...]: <broker>/<id>: <what>".
        text = message.split("]: ", 1)[-1]
        if _TALLY.match(text.strip()):
            return
        match = _BROKER.match(text)
        if match is None:
            if any(word in text for word in _TRANSPORT_WORDS):
                self._count("(cluster)", text)
            elif level >= logging.WARNING:
                self.other = [*self.other[-4:], text]
            return
        broker, what = match.group("broker"), match.group("what")
        if any(word in what for word in _TRANSPORT_WORDS):
            connect = _CONNECT.search(what)
            self._count(broker, connect.group("reason") if connect else what)
        elif level >= logging.WARNING:
            self.other = [*self.other[-4:], text]

    def _count(self, broker: str, reason: str) -> None:
        self.by_broker[broker] = self.by_broker.get(broker, 0) + 1
        self.reasons[broker] = reason.strip()

    @property
    def total(self) -> int:
        return sum(self.by_broker.values())

    def summary(self) -> str:
        """One line: each failing broker with its count and last reason ('' when none)."""
        return ", ".join(
            f"{broker} ({count} connection failures: {self.reasons[broker]})"
            for broker, count in sorted(self.by_broker.items())
        )
