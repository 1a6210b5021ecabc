"""Where a record came from: the lineage header the mirror writes and the audit reads.

The mirror (``sluice.pipeline.mirror.mirror``) copies records from live clusters into the
offline cluster. Each copy carries one header naming the record's **origin** — the cluster,
topic, partition and offset it was first written at::

    key:   "sluice-lineage"
    value: b"<cluster>/<topic>/<partition>/<offset>"     ASCII, e.g. b"live-a/page_view/3/1042"

Invariants:

* The origin is set once. A record that already has a lineage header (mirrored twice, say
  live → offline → archive) keeps it: de-duplication needs the first position, not the last hop.
* Cluster aliases are ``[A-Za-z0-9._-]+`` and Kafka topic names are ``[A-Za-z0-9._-]+`` too, so
  ``/`` cannot occur inside a field and the value splits unambiguously into four parts.
* ``(cluster, topic, partition, offset)`` names one record of one log: two records downstream
  with the same origin are copies of one record, so ``count - count(distinct origin)`` is the
  number of duplicates a mirror restart (at-least-once) introduced.

A record without the header is its own origin: :func:`origin` returns its own position, under
the alias of the cluster it was read from.

A leaf of ``sluice.pipeline``: it imports nothing of Sluice, so the mirror and the audit (and the
tests' topic readers) share it without importing each other. Pure functions and frozen values;
thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "LINEAGE_HEADER",
    "Lineage",
    "LineageError",
    "check_cluster_alias",
    "origin",
]

LINEAGE_HEADER = "sluice-lineage"

_NAME = re.compile(r"[A-Za-z0-9._-]+")


class LineageError(ValueError):
    """A lineage header value (or a cluster alias) is not in the documented form."""


def check_cluster_alias(alias: str) -> str:
    """``alias`` if it can appear in a lineage header; :class:`LineageError` otherwise."""
    if not _NAME.fullmatch(alias):
        raise LineageError(f"cluster alias must match [A-Za-z0-9._-]+, found {alias!r}")
    return alias


@dataclass(frozen=True, slots=True)
class Lineage:
    """The origin of one record: ``cluster``/``topic``/``partition``/``offset``."""

    cluster: str
    topic: str
    partition: int
    offset: int

    def __post_init__(self) -> None:
        check_cluster_alias(self.cluster)
        if not _NAME.fullmatch(self.topic):
            raise LineageError(f"topic must match [A-Za-z0-9._-]+, found {self.topic!r}")
        if self.partition < 0 or self.offset < 0:
            raise LineageError(
                f"partition and offset must be >= 0, found {self.partition} and {self.offset}"
            )

    def encode(self) -> bytes:
        return f"{self.cluster}/{self.topic}/{self.partition}/{self.offset}".encode("ascii")

    @classmethod
    def decode(cls, value: bytes | str) -> Lineage:
        text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
        parts = text.split("/")
        if len(parts) != 4 or not parts[2].isdigit() or not parts[3].isdigit():
            raise LineageError(
                f"expected <cluster>/<topic>/<partition>/<offset> in {LINEAGE_HEADER!r}, "
                f"found {text!r}"
            )
        return cls(parts[0], parts[1], int(parts[2]), int(parts[3]))


def origin(
    headers: Iterable[tuple[str, bytes | None]] | None,
    cluster: str,
    topic: str,
    partition: int,
    offset: int,
) -> Lineage:
    """The record's origin: its lineage header when it has one, else its own position."""
    for key, value in headers or ():
        if key == LINEAGE_HEADER and value is not None:
            return Lineage.decode(value)
    return Lineage(cluster, topic, partition, offset)
