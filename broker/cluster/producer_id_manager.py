"""``ProducerIdManager``: producer ids that no other broker of the cluster hands out (Kafka's
``ZkProducerIdManager``).

Ids come in blocks of ``ProducerIdBlockZNode`` size taken from ``/latest_producer_id_block``:
read the znode and its version, write the next block conditionally on that version, retry on a
conflict (another broker took a block meanwhile). The broker hands out the ids of its block one
by one, then takes the next block. Ids of a block not used before a restart are never reused.

Thread-safe (one lock; the ZooKeeper calls of a block change are made under it, from the
caller's thread — call it off the event loop).
"""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from sluice.broker.cluster.zk_data import ProducerIdBlock, ProducerIdBlockZNode


class ProducerIdManager:
    """This broker's current block of producer ids. See the module docstring."""

    def __init__(self, zk: KazooClient, broker_id: int) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._lock = threading.Lock()
        self._next = 0
        self._end = -1

    def next_producer_id(self) -> int:
        with self._lock:
            if self._next > self._end:
                block = self._take_block()
                self._next, self._end = block.block_start, block.block_end
            pid = self._next
            self._next += 1
            return pid

    def _take_block(self) -> ProducerIdBlock:
        path = ProducerIdBlockZNode.path()
        while True:
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                block = ProducerIdBlockZNode.next_block(None, self.broker_id)
                try:
                    self.zk.create(path, ProducerIdBlockZNode.encode(block))
                except NodeExistsError:
                    continue
                return block
            block = ProducerIdBlockZNode.next_block(
                ProducerIdBlockZNode.decode(data), self.broker_id
            )
            try:
                self.zk.set(path, ProducerIdBlockZNode.encode(block), version=stat.version)
            except BadVersionError:
                continue
            return block
