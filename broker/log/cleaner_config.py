"""``CleanerConfig``: the broker-wide settings of the log cleaner, under Kafka's names.

    log.cleaner.enable                  true        start the cleaner thread(s) at startup
    log.cleaner.threads                 1           cleaner threads (each its own key map)
    log.cleaner.dedupe.buffer.size      134217728   memory for the key maps, all threads
    log.cleaner.io.buffer.load.factor   0.9         how full a key map may get
    log.cleaner.backoff.ms              15000       sleep when no log needs cleaning

The per-topic settings (``cleanup.policy``, ``min.cleanable.dirty.ratio``, the compaction
lags, ``delete.retention.ms``) are in :class:`~sluice.broker.log.log_config.LogConfig`.

Memory bound: Kafka's ``SkimpyOffsetMap`` stores a 16-byte MD5 of each key and an 8-byte
offset in a preallocated buffer, so a thread holds ``buffer / threads / 24`` keys. A Python
dict of 16-byte digests to offsets costs about :data:`BYTES_PER_KEY` bytes per entry
(measured: the ``bytes`` object, the ``int``, and the dict's slot and index), so Sluice
divides by that instead; the same setting then bounds the same memory, with fewer keys.
Immutable and thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common import options

BYTES_PER_KEY = 160


@dataclass(frozen=True)
class CleanerConfig:
    enable: bool = True
    num_threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    dedupe_buffer_load_factor: float = 0.9
    backoff_ms: int = 15_000

    def __post_init__(self) -> None:
        if self.num_threads < 1:
            raise ValueError(f"log.cleaner.threads: expected >= 1, found {self.num_threads}")
        if not 0.0 < self.dedupe_buffer_load_factor <= 1.0:
            raise ValueError(
                f"log.cleaner.io.buffer.load.factor: expected 0 < f <= 1, "
                f"found {self.dedupe_buffer_load_factor}"
            )
        if self.max_keys_per_thread < 1:
            raise ValueError(
                f"log.cleaner.dedupe.buffer.size: expected room for at least one key per "
                f"thread ({BYTES_PER_KEY} bytes), found {self.dedupe_buffer_size} bytes for "
                f"{self.num_threads} threads"
            )
        if self.backoff_ms < 0:
            raise ValueError(f"log.cleaner.backoff.ms: expected >= 0, found {self.backoff_ms}")

    @property
    def max_keys_per_thread(self) -> int:
        """How many keys one thread's map holds before a pass stops mapping (Kafka's
        ``slots * dupBufferLoadFactor``)."""
        slots = self.dedupe_buffer_size // self.num_threads // BYTES_PER_KEY
        return int(slots * self.dedupe_buffer_load_factor)

    @classmethod
    def from_broker_properties(cls, props: Mapping[str, str]) -> CleanerConfig:
        """From ``server.properties`` keys; unrelated keys are ignored. Raises ValueError."""

        raw_factor = options.text(props, "log.cleaner.io.buffer.load.factor")
        try:
            load_factor = 0.9 if raw_factor is None else float(raw_factor)
        except ValueError:
            raise ValueError(
                f"log.cleaner.io.buffer.load.factor: expected a number, found {raw_factor!r}"
            ) from None
        return cls(
            enable=options.boolean(props, "log.cleaner.enable", True, error=ValueError),
            num_threads=options.integer(props, "log.cleaner.threads", 1, error=ValueError),
            dedupe_buffer_size=options.integer(
                props, "log.cleaner.dedupe.buffer.size", 128 << 20, error=ValueError
            ),
            dedupe_buffer_load_factor=load_factor,
            backoff_ms=options.integer(props, "log.cleaner.backoff.ms", 15_000, error=ValueError),
        )
