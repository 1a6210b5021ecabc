"""``collection_paused``: no cyclic garbage collection inside a ``with`` block; the caller's
setting is restored after it.

Why: CPython's cyclic collector runs after every 700 net allocations of container objects and
walks every object young enough to be in the generations it collects (each tenth collection
takes in the next older generation, and a full one the whole heap). A load allocates many
objects that are not garbage and makes no reference cycles, so the walks find nothing:

* a Spark task of 40,000 records holds librdkafka's messages until their Arrow batch is built,
  and a writer and its pending batches per open file: about 90 young collections and 8 older
  ones a task, 10–30 ms of its 100–550 ms in PySpark's workers (measured with ``gc.callbacks``
  on the 2-core bench machine, one topic of 4 partitions or 100 topics of 4 alike);
* the driver's plan, verify and commit of 800 partitions build a range, a result and a file
  entry per partition: 5–45 ms per load, 40 ms when a full collection walks the driver's heap
  of PySpark, Py4J and pyarrow objects; under 1 ms for 8 partitions.

Reference counting still frees every object that is not in a cycle the moment it is dropped; a
cycle made inside the block waits for the first collection after it. A long block that may
make cycles (a task of millions of records, with decoders and error paths not written here)
calls ``allow()`` between units of work: it collects once when more than ``limit`` container
objects were allocated and not freed since the last collection (``gc.get_count()[0]``, which
counts on while the collector is off), so such garbage stays bounded; a 40,000-record task
stays well below the default limit.

Blocks may nest (the inner one leaves the collector off). Per process, not per thread: CPython
has one collector, so the process's other threads (the driver's progress thread, Py4J's) run
without it for the block too.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_LIMIT", "CollectionPause", "collection_paused"]

YOUNG_LIMIT = 500_000
"""Container objects allocated and not freed since the last collection that make ``allow()``
collect: some 50-100 MB of small objects. A task of 40,000 records peaks at 14,000-25,000
(one topic of 4 partitions or 100 topics of 4, measured)."""


class CollectionPause:
    """The cyclic collector off from ``__enter__`` to ``__exit__``, back on after if it was on;
    ``allow()`` collects when more than ``limit`` objects piled up (module doc)."""

    def __init__(self, limit: int = YOUNG_LIMIT) -> None:
        self.limit = limit
        self.collections = 0  # made by allow()
        self._was_enabled = False

    def __enter__(self) -> CollectionPause:
        self._was_enabled = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc_info: object) -> None:  # whatever ended the block
        if self._was_enabled:
            gc.enable()

    def allow(self) -> None:
        """Collect once if more than ``limit`` container objects are new since the last
        collection; call between units of work."""
        if gc.get_count()[0] > self.limit:
            gc.collect()
            self.collections += 1


def collection_paused(limit: int = YOUNG_LIMIT) -> CollectionPause:
    """``with collection_paused():`` — a ``CollectionPause``."""
    return CollectionPause(limit)
