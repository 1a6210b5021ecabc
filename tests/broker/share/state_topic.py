"""``LocalStateTopic``: ``__share_group_state`` as real logs in a temporary directory — the
transport a :class:`~sluice.broker.share.share_state_log.ShareStateLog` writes to and reads
from in the tests that run without a broker. An append is committed once it is in the log (a
single replica); :meth:`reopen` closes the logs and opens them again from disk, as a restarted
or new leader finds them."""

from __future__ import annotations

from pathlib import Path

from sluice.broker.log.log import Log
from sluice.broker.log.log_manager import LogManager
from sluice.broker.server.share_state_host import read_log
from sluice.broker.share.share_state_log import TOPIC, RawRecord


class LocalStateTopic:
    def __init__(self, path: Path, partitions: int = 3) -> None:
        self.path = path
        self.count = partitions
        self.appends = 0
        self.manager, self.logs = self._open()

    def _open(self) -> tuple[LogManager, list[Log]]:
        manager = LogManager([self.path])
        manager.startup()
        return manager, [manager.get_or_create_log(TOPIC, p) for p in range(self.count)]

    async def partitions(self) -> int:
        return self.count

    async def append(self, partition: int, batch: bytes) -> None:
        self.logs[partition].append(batch)
        self.logs[partition].flush()
        self.appends += 1

    async def read(self, partition: int) -> list[RawRecord]:
        return read_log(self.logs[partition])

    def reopen(self) -> None:
        self.manager.shutdown()
        self.manager, self.logs = self._open()

    def close(self) -> None:
        self.manager.shutdown()
