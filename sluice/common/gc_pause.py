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
cycle made inside the block waits for the first collection after it, which counts everything
allocated meanwhile.

Blocks may nest (the inner one leaves the collector off). Per process, not per thread: CPython
has one collector, so the process's other threads (the driver's progress thread, Py4J's) run
without it for the block too.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["collection_paused"]


@contextmanager
def collection_paused() -> Iterator[None]:
    """Turn the cyclic collector off for the block; turn it back on after it if it was on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
