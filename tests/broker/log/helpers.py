"""Small builders shared by the storage tests."""

from __future__ import annotations

from sluice.broker.log.records import NONE, encode_batch


def batch(
    n: int = 1,
    *,
    ts: int = 1_000,
    value_size: int = 20,
    codec: int = NONE,
    tag: bytes = b"",
    timestamps: list[int] | None = None,
) -> bytes:
    """A producer-style batch of ``n`` records (base offset 0)."""
    records = [(b"k%d" % i + tag, (b"v%d-" % i + tag).ljust(value_size, b".")) for i in range(n)]
    return encode_batch(records, timestamps=timestamps or [ts + i for i in range(n)], codec=codec)
