"""The producer side of the audit (paper §4): stamp every message, count it, report the counts.

"Every message carries a timestamp and a server name, and each producer periodically publishes
a monitoring event with the count it published per topic in a fixed window." The audit job
(``sluice.pipeline.audit.run``) compares these counts with what each downstream tier holds.

What :class:`AuditingProducer` adds to a confluent-kafka ``Producer``
======================================================================
* **Stamps.** Each message gets the record timestamp explicitly (ms since the epoch, the
  producer's clock at ``produce()``; the record's timestamp type is CreateTime) and one header
  naming the producing server::

      key:   "sluice-audit-server"          (SERVER_HEADER)
      value: b"<server>"                    UTF-8, default socket.gethostname()

  A header of that name the caller passed is replaced, so every message has exactly one.
* **Counts.** Per ``(topic, window)`` with ``window = timestamp // window_ms``, counted when the
  delivery report says the broker has the message: a failed send is not "published".
* **Reports.** At the first ``produce()`` or ``poll()`` after each window boundary, one
  ``AuditCount`` event (``schemas/audit_count.avsc``: producer, topic, window_start,
  window_end, count) per ``(topic, window)`` of the *finished* windows with counts not
  reported yet goes to the audit topic (default ``sluice-audit``), keyed by the server name,
  as Confluent-framed Avro (magic 0, schema id, body: ``sluice.schemas.serde``) under the subject
  ``<audit topic>-value``, registered on first use. ``flush()`` and ``close()`` report
  everything outstanding, the current, unfinished window included.

Reports are **additive**: an event carries only counts no earlier event carried. Deliveries
that arrive after their window was reported, a partial window reported by ``flush()``/
``close()``, a restarted producer under the same server name — each adds an event, and the
audit sums them. An audit event that fails to be delivered puts its count back, to go out with
the next report. Audit events are stamped like any message but never counted.

The producer reports nothing while the application calls none of its methods: an idle
producer's last window goes out with its next ``poll()`` (or ``flush()``/``close()``). Call
``poll()`` regularly, as with any confluent-kafka producer — without it there are no delivery
reports, hence no counts.

Duplicates: a report retried by librdkafka after a lost acknowledgement would be counted twice
by the audit (an additive event cannot be told apart from its copy); set
``enable.idempotence=true`` in the producer config to rule that out.

Threads
=======
confluent-kafka runs delivery callbacks inside ``poll()``/``flush()`` of the thread that calls
them — never in librdkafka's own threads — so the counters change only in application threads.
They are guarded by one lock, which is never held while calling into the producer; with it,
``produce``/``poll``/``flush`` may be called from several threads, as the wrapped ``Producer``
allows. A report takes its counts out of the pending table under the lock, so two threads
reporting at once send disjoint counts. ``close()`` is for one thread, after the others stop.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Producer

from sluice.schemas import schema_path
from sluice.schemas.client import RegistryClient
from sluice.schemas.serde import AvroSerializer

__all__ = [
    "DEFAULT_AUDIT_TOPIC",
    "DEFAULT_WINDOW_MS",
    "SERVER_HEADER",
    "AuditReportError",
    "AuditingProducer",
    "WindowCount",
    "audit_subject",
    "window_of",
]

log = logging.getLogger("sluice.audit.producer")

SERVER_HEADER = "sluice-audit-server"
DEFAULT_AUDIT_TOPIC = "sluice-audit"
DEFAULT_WINDOW_MS = 60_000
AUDIT_SCHEMA = "audit_count"

Headers = Mapping[str, Any] | Iterable[tuple[str, Any]] | None
DeliveryCallback = Callable[[Any, Any], None]


def window_of(timestamp_ms: int, window_ms: int) -> int:
    """The window index of a timestamp: ``timestamp_ms // window_ms`` (floor, also below 0)."""
    return timestamp_ms // window_ms


def audit_subject(audit_topic: str) -> str:
    """The registry subject of the audit events' schema: ``<audit topic>-value``."""
    return f"{audit_topic}-value"


class AuditReportError(RuntimeError):
    """``close()`` left messages undelivered or counts unreported; the message says which."""


@dataclass(frozen=True, slots=True, order=True)
class WindowCount:
    """Messages one producer delivered to ``topic`` in ``[window_start, window_end)`` (ms)."""

    topic: str
    window_start: int
    window_end: int
    count: int

    def record(self, producer: str) -> dict[str, Any]:
        """The ``AuditCount`` record (``schemas/audit_count.avsc``) of this count."""
        return {
            "producer": producer,
            "topic": self.topic,
            "window_start": self.window_start,
            "window_end": self.window_end,
            "count": self.count,
        }


def _stamp(headers: Headers, server: bytes) -> list[tuple[str, Any]]:
    """``headers`` as a list, without any server header, plus ours last."""
    if headers is None:
        items: Iterable[tuple[str, Any]] = ()
    elif isinstance(headers, Mapping):
        items = headers.items()
    else:
        items = headers
    stamped = [(k, v) for k, v in items if k != SERVER_HEADER]
    stamped.append((SERVER_HEADER, server))
    return stamped


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class AuditingProducer:
    """A confluent-kafka ``Producer`` whose messages the audit can account for.

    ``config`` goes to ``confluent_kafka.Producer`` unchanged. ``registry_url`` is the schema
    registry the audit events' schema is registered in (or pass a ready ``registry_client``;
    the first report registers the schema, one HTTP call; while the registry is unreachable
    each report tries again and keeps its counts). ``server`` names this producer (default the
    host name). ``clock_ms`` returns the time in ms since the epoch (default the wall clock);
    it stamps the messages and decides when windows finish — replaying with recorded times, or
    a test, may pass its own.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        registry_url: str | None = None,
        registry_client: RegistryClient | None = None,
        server: str | None = None,
        audit_topic: str = DEFAULT_AUDIT_TOPIC,
        window_ms: int = DEFAULT_WINDOW_MS,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        if window_ms <= 0:
            raise ValueError(f"window_ms: expected a positive number of ms, found {window_ms}")
        self.server = server if server is not None else socket.gethostname()
        if not self.server:
            raise ValueError("server: expected a non-empty name, found ''")
        self.audit_topic = audit_topic
        self.window_ms = window_ms
        self._server_bytes = self.server.encode("utf-8")
        self._clock = clock_ms or _now_ms
        if registry_client is None and registry_url is not None:
            client = RegistryClient(registry_url)
        elif registry_client is not None and registry_url is None:
            client = registry_client
        else:
            found = "neither" if registry_url is None else "both"
            raise ValueError(f"expected one of registry_url and registry_client, found {found}")
        self._serializer = AvroSerializer(
            client, schema_path(AUDIT_SCHEMA).read_text(), audit_subject(audit_topic)
        )
        self.producer = Producer(dict(config))
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], int] = {}  # delivered, not yet handed to a report
        self._reported: dict[tuple[str, int], int] = {}  # reports the broker acknowledged
        self._failed = 0
        self._next_report = (window_of(self._clock(), window_ms) + 1) * window_ms
        self._closed = False

    # -- the Producer interface ------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Headers = None,
        partition: int | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> int:
        """Stamp, send and (on delivery) count one message; returns its timestamp (ms).

        Raises what ``Producer.produce`` raises (``BufferError`` when the queue is full: poll
        and retry). Sending to the audit topic is refused with ``ValueError``.
        """
        if self._closed:
            raise RuntimeError("produce: expected an open AuditingProducer, found it closed")
        if topic == self.audit_topic:
            raise ValueError(
                f"topic: expected an application topic, found the audit topic {topic!r} "
                "(the producer writes its own audit events)"
            )
        timestamp = self._clock()
        callback = functools.partial(
            self._delivered, topic, window_of(timestamp, self.window_ms), on_delivery
        )
        kwargs: dict[str, Any] = {
            "value": value,
            "key": key,
            "headers": _stamp(headers, self._server_bytes),
            "timestamp": timestamp,
            "on_delivery": callback,
        }
        if partition is not None:
            kwargs["partition"] = partition
        self.producer.produce(topic, **kwargs)
        self._maybe_report(timestamp)
        return timestamp

    def poll(self, timeout: float = 0) -> int:
        """``Producer.poll`` (runs delivery callbacks), then report windows that finished."""
        served = int(self.producer.poll(timeout))
        self._maybe_report(self._clock())
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Report every count (the current window's too), deliver everything; returns the
        number of messages still queued, as ``Producer.flush``.

        Counts of messages delivered during the flush are reported in a further round; counts
        whose report could not be sent (registry unreachable, queue full) stay pending.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        remaining = 0
        for _ in range(3):  # report, deliver; report what that delivered; a retry
            self._report(None)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            remaining = int(self.producer.flush() if left is None else self.producer.flush(left))
            if not self.pending() or (deadline is not None and time.monotonic() >= deadline):
                break
        return remaining

    def close(self, timeout: float | None = 30.0) -> None:
        """``flush`` and refuse further messages; raise :class:`AuditReportError` if any
        message is still undelivered or any count unreported (they would look lost to the
        audit, or extra)."""
        remaining = self.flush(timeout)
        self._closed = True
        unreported = self.pending()
        if remaining or unreported:
            windows = ", ".join(f"{t}@{w * self.window_ms}:{n}" for (t, w), n in unreported.items())
            raise AuditReportError(
                f"producer {self.server!r}: expected every message delivered and every count "
                f"reported to {self.audit_topic!r}, found {remaining} messages queued and "
                f"{len(unreported)} unreported counts" + (f" ({windows})" if windows else "")
            )

    def __len__(self) -> int:
        return len(self.producer)

    def __enter__(self) -> AuditingProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close()

    # -- counters --------------------------------------------------------------------------

    def pending(self) -> dict[tuple[str, int], int]:
        """``{(topic, window): count}`` delivered but not yet in a sent report (a copy)."""
        with self._lock:
            return dict(self._pending)

    def reported(self) -> dict[tuple[str, int], int]:
        """``{(topic, window): count}`` whose reports the broker acknowledged (a copy)."""
        with self._lock:
            return dict(self._reported)

    @property
    def failed(self) -> int:
        """Messages whose delivery failed (not counted)."""
        with self._lock:
            return self._failed

    def _delivered(
        self, topic: str, window: int, user_callback: DeliveryCallback | None, err: Any, msg: Any
    ) -> None:
        with self._lock:
            if err is None:
                key = (topic, window)
                self._pending[key] = self._pending.get(key, 0) + 1
            else:
                self._failed += 1
        if user_callback is not None:
            user_callback(err, msg)

    # -- reports ---------------------------------------------------------------------------

    def _maybe_report(self, now_ms: int) -> None:
        if now_ms < self._next_report:
            return
        current = window_of(now_ms, self.window_ms)
        self._next_report = (current + 1) * self.window_ms
        self._report(current)

    def _report(self, before_window: int | None) -> bool:
        """Send the pending counts of windows before ``before_window`` (all when ``None``).

        Never raises: counts that could not be handed to the producer go back to the pending
        table for the next report, and the failure is logged. Returns whether all went out.
        """
        with self._lock:
            due = sorted(
                (k, n)
                for k, n in self._pending.items()
                if before_window is None or k[1] < before_window
            )
            for k, _ in due:
                del self._pending[k]
        if not due:
            return True
        now = self._clock()
        sent = 0
        try:
            for (topic, window), count in due:
                start = window * self.window_ms
                item = WindowCount(topic, start, start + self.window_ms, count)
                self.producer.produce(
                    self.audit_topic,
                    key=self._server_bytes,
                    value=self._serializer(item.record(self.server)),
                    headers=[(SERVER_HEADER, self._server_bytes)],
                    timestamp=now,
                    on_delivery=functools.partial(self._report_delivered, topic, window, count),
                )
                sent += 1
        except Exception as exc:  # BufferError, the registry, ...: retried with the next report
            self._restore(due[sent:])
            log.warning(
                "audit report to %r: %d of %d counts not sent, kept for the next report: %s: %s",
                self.audit_topic,
                len(due) - sent,
                len(due),
                type(exc).__name__,
                exc,
            )
            return False
        return True

    def _restore(self, counts: Iterable[tuple[tuple[str, int], int]]) -> None:
        with self._lock:
            for key, n in counts:
                self._pending[key] = self._pending.get(key, 0) + n

    def _report_delivered(self, topic: str, window: int, count: int, err: Any, msg: Any) -> None:
        if err is not None:
            log.warning(
                "audit report %s@%d (%d messages) not delivered, kept for the next report: %s",
                topic,
                window * self.window_ms,
                count,
                err,
            )
            self._restore([((topic, window), count)])
            return
        with self._lock:
            key = (topic, window)
            self._reported[key] = self._reported.get(key, 0) + count
