"""``DataWatches``: data watches on many znodes (a broker's partition states), every read
asynchronous, so that watching 1,000 new partitions costs about one ZooKeeper round trip.

kazoo's ``DataWatch`` reads its znode synchronously when made, and again synchronously on
kazoo's one callback thread each time it fires. A broker that learned of a 1,000-partition
topic made 1,000 of them in a row (a round trip each, on the metadata worker), then read the
1,000 states one after the other as the controller created them (a round trip each, on the
callback thread): seconds on an idle machine, minutes on a busy one, and CreateTopics waits for
those leaders (issue #26). Here each read is a ``get_async``/``exists_async`` whose answer is
handled on kazoo's completion thread, so thousands of reads are in flight at once.

What a callback sees is what ``DataWatch`` gives it: ``callback(data, stat)`` first with the
znode's data (``None, None`` while it does not exist), then after each change (skipped when the
znode's ``mzxid`` is what was last delivered); returning ``False`` ends that watch. After every
(re)connection each live watch reads again, as ``DataWatch``'s session listener does: a new
session has no watches, and a change may have been missed while disconnected. A read that fails
(connection loss, expired session) is left to that re-read.

Thread-safety: :meth:`add` and :meth:`close` from any thread. Callbacks run on kazoo's
completion thread, one at a time, in ZooKeeper's answer order. Each watch registers one
watcher object for its whole life: kazoo keeps a path's watchers in a set, so reading again
never stacks a second one (which would double the reads at every change).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

__all__ = ["DataWatches", "WatchCallback"]

log = logging.getLogger(__name__)

WatchCallback = Callable[[bytes | None, ZnodeStat | None], bool | None]


class _Watch:
    """One path's watch. ``version``/``called`` are touched on the completion thread only."""

    def __init__(self, owner: DataWatches, path: str, callback: WatchCallback) -> None:
        self.path = path
        self.callback = callback
        self.version: int | None = None
        self.called = False
        self.stopped = False
        # The one watcher object of this watch (see the module docstring).
        self.watcher: Callable[[WatchedEvent], None] = lambda event: owner._on_event(self, event)


class DataWatches:
    """Pipelined data watches over one kazoo client; see the module docstring."""

    def __init__(self, zk: KazooClient) -> None:
        self._zk = zk
        self._lock = threading.Lock()
        self._watches: dict[str, _Watch] = {}
        self._closed = False
        zk.add_listener(self._on_session_state)

    def add(self, path: str, callback: WatchCallback) -> None:
        """Watch ``path``; ``callback`` is first called once its first read answers. A path
        watched already gets the new callback in place of the old one."""
        watch = _Watch(self, path, callback)
        with self._lock:
            if self._closed:
                return
            old = self._watches.get(path)
            if old is not None:
                old.stopped = True
            self._watches[path] = watch
        self._read(watch)

    def close(self) -> None:
        """End every watch (no callback is called after this returns, but one running)."""
        with self._lock:
            self._closed = True
            for watch in self._watches.values():
                watch.stopped = True
            self._watches.clear()
        self._zk.remove_listener(self._on_session_state)

    # -- reads (any thread issues them; answers on the completion thread) -------------------

    def _read(self, watch: _Watch) -> None:
        if watch.stopped:
            return
        try:
            self._zk.get_async(watch.path, watch=watch.watcher).rawlink(
                lambda result: self._got(watch, result)
            )
        except KazooException:  # the client is closed or between sessions: re-read later
            return

    def _got(self, watch: _Watch, result: Any) -> None:
        try:
            data, stat = result.get()
        except NoNodeError:
            with contextlib.suppress(KazooException):  # as in _read
                self._zk.exists_async(watch.path, watch=watch.watcher).rawlink(
                    lambda r: self._existed(watch, r)
                )
            return
        except KazooException:  # connection lost: the reconnection reads again
            return
        self._deliver(watch, data, stat)

    def _existed(self, watch: _Watch, result: Any) -> None:
        try:
            stat = result.get()
        except KazooException:
            return
        if stat is not None:  # created between the two reads: read its data
            self._read(watch)
            return
        self._deliver(watch, None, None)

    def _deliver(self, watch: _Watch, data: bytes | None, stat: ZnodeStat | None) -> None:
        version = None if stat is None else stat.mzxid
        if watch.stopped or (watch.called and version == watch.version):
            return
        watch.version, watch.called = version, True
        try:
            keep = watch.callback(data, stat)
        except Exception:
            log.exception("data watch on %s: the callback failed", watch.path)
            return
        if keep is False:
            watch.stopped = True
            with self._lock:
                if self._watches.get(watch.path) is watch:
                    del self._watches[watch.path]

    # -- events -----------------------------------------------------------------------------

    def _on_event(self, watch: _Watch, event: WatchedEvent) -> None:
        if event.type == EventType.NONE:  # the session ended: the reconnection reads again
            return
        self._read(watch)

    def _on_session_state(self, state: str) -> None:
        if state != KazooState.CONNECTED:
            return
        with self._lock:
            watches = list(self._watches.values())
        for watch in watches:
            self._read(watch)
