"""``BrokerRegistration``: one broker's ``/brokers/ids/<id>`` and the health of the ZooKeeper
session that holds it.

The registration is an ephemeral znode (layout in ``zk_data.BrokerIdZNode``): it lives as long
as the session, and the controller treats its disappearance as the broker's death (and a new
``czxid`` — Kafka's broker epoch — as a restart).

**Session states** (kazoo's ``KazooState``), and what they mean for a partition leader::

    CONNECTED ──(connection lost: a ping unanswered for 2/3 of the session timeout,
       ▲          or the socket broke)──▶ SUSPENDED ──(ZooKeeper expired the session)──▶ LOST
       │                                      │                                         │
       └──────── same session back ◀──────────┘                                         │
       └──────── new session: re-registered, leaders re-read (``mark_rejoined``) ◀──────┘

While SUSPENDED the broker cannot know whether ZooKeeper still holds its session: if it
expired, the controller may already have elected another leader, and an ``acks=1`` write taken
now would be acknowledged by a deposed leader and lost when it truncates (the loss Kafka
documents). So :attr:`session_intact` is False from the moment kazoo reports SUSPENDED or LOST
until the same session is back, or a new one has re-registered and re-read the states of the
partitions this broker led (the metadata worker calls :meth:`mark_rejoined`). The replica
manager refuses ``acks=0``/``acks=1`` produce requests as leader meanwhile
(NOT_LEADER_OR_FOLLOWER: the client refreshes its metadata and retries, elsewhere or here once
it is back); ``acks=all`` is safe without the fence (the replica manager says why). That narrows the
window of an acknowledged-then-lost ``acks=1`` write from "until the session expires and the
client learns of the new leader" to "until kazoo notices the disconnect" — at most 2/3 of the
session timeout, and nothing once it has noticed.

**Deregistration** (:meth:`deregister`) deletes the znode if this session owns it, each call
bounded by a timeout, and is skipped at once when the client is not connected: kazoo queues a
request made while disconnected until it reconnects, which could be never (ZooKeeper down), and
the ephemeral znode goes with the session anyway.

Thread safety: the state flags are single attribute writes, read from any thread;
:meth:`on_state` runs on kazoo's event thread, the rest on the caller's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from sluice.broker.cluster.zk_data import BrokerIdZNode

log = logging.getLogger(__name__)

#: Bound of each ZooKeeper call made while deregistering (seconds).
DEREGISTER_CALL_TIMEOUT = 2.0


class BrokerRegistrationError(Exception):
    """``/brokers/ids/<id>`` is held by another live session: two brokers share an id."""


class BrokerRegistration:
    """One broker's registration and session state. See the module docstring."""

    def __init__(self, zk: KazooClient, broker_id: int, *, timeout: float = 10.0) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.timeout = timeout
        #: The registration znode's czxid (Kafka's broker epoch), -1 until registered.
        self.czxid = -1
        self._suspended = False
        # A new session must re-register (set when the session is lost, cleared only once
        # the metadata worker has done it: a disconnect midway asks for it again).
        self._rejoin_pending = False
        self._intact = False

    @property
    def session_intact(self) -> bool:
        """True while this broker is registered under a session it knows ZooKeeper holds."""
        return self._intact

    def session_id(self) -> int | None:
        client_id = self.zk.client_id
        return None if client_id is None else int(client_id[0])

    def register(
        self,
        host: str,
        port: int,
        rack: str | None,
        endpoints: Sequence[tuple[str, str, str, int]] = (),
    ) -> None:
        """Create ``/brokers/ids/<id>``. If it exists for another session — our own previous
        session not yet expired, or another broker with our id — wait for it to go away (at
        most ``timeout`` seconds, then :class:`BrokerRegistrationError`)."""
        path = BrokerIdZNode.path(self.broker_id)
        data = BrokerIdZNode.encode(host, port, rack, endpoints=endpoints)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                self.zk.create(path, data, ephemeral=True)
                _, stat = self.zk.get(path)
                self.czxid = stat.czxid
                log.info("broker %d: registered at %s", self.broker_id, path)
                return
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.session_id():
                    self.zk.set(path, data)
                    self.czxid = stat.czxid
                    return
            if time.monotonic() > deadline:
                raise BrokerRegistrationError(
                    f"{path}: expected to register broker {self.broker_id}, found it registered "
                    f"by another session for more than {self.timeout}s"
                )
            time.sleep(0.1)

    def deregister(self) -> None:
        """Delete the registration if this session owns it; never blocks for long (see the
        module docstring). Failures are logged at DEBUG: the session's end removes it too."""
        self._intact = False
        if not self.zk.connected:
            log.info(
                "broker %d: not connected to ZooKeeper; leaving the registration to expire "
                "with the session", self.broker_id,
            )  # fmt: skip
            return
        path = BrokerIdZNode.path(self.broker_id)
        try:
            _, stat = self.zk.get_async(path).get(timeout=DEREGISTER_CALL_TIMEOUT)
            if stat.ephemeralOwner == self.session_id():
                self.zk.delete_async(path, version=stat.version).get(
                    timeout=DEREGISTER_CALL_TIMEOUT
                )
        except (KazooException, KazooTimeoutError) as e:
            log.debug("broker %d: deregistration skipped: %r", self.broker_id, e)

    # -- session state ---------------------------------------------------------------------

    def on_state(self, state: str) -> str | None:
        """Follow a kazoo state change (kazoo's thread). Returns what the metadata worker must
        do now: ``"reregister"`` (a new session), ``"refresh"`` (the same session back: watch
        events may have been missed), or None."""
        if state == KazooState.LOST:
            self._rejoin_pending = True
            if self._intact:
                log.warning("broker %d: ZooKeeper session lost; refusing acks=0/1 produce "
                            "requests as leader until re-registered", self.broker_id)  # fmt: skip
            self._intact = False
        elif state == KazooState.SUSPENDED:
            self._suspended = True
            if self._intact:
                log.warning(
                    "broker %d: ZooKeeper connection suspended; refusing acks=0/1 produce "
                    "requests as leader until it is back", self.broker_id,
                )  # fmt: skip
            self._intact = False
        elif state == KazooState.CONNECTED:
            if self._rejoin_pending:  # a new session: the registration is gone
                self._suspended = False
                return "reregister"
            if self._suspended:  # same session: nothing expired, leadership did not move
                self._suspended = False
                self._intact = True
                log.info("broker %d: ZooKeeper connection back, same session", self.broker_id)
                return "refresh"
        return None

    def mark_registered(self) -> None:
        """The first registration is done: the session is ours and known to ZooKeeper."""
        self._intact = not (self._rejoin_pending or self._suspended)

    def mark_rejoined(self) -> None:
        """A new session re-registered and re-read the states of the partitions this broker
        led: it may act as a leader again (unless the connection dropped meanwhile)."""
        self._rejoin_pending = False
        if not self._suspended:
            self._intact = True
            log.info("broker %d: re-registered with a new ZooKeeper session", self.broker_id)
