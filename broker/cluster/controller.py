"""``Controller``: the broker that assigns partition leaders, as Kafka 2.x's ``KafkaController``.

Every broker runs a :class:`Controller`; the one that creates the ephemeral ``/controller`` znode
is active, the others watch that znode and try again when it disappears.

Election (Kafka's ``registerControllerAndIncrementControllerEpoch``): read ``/controller_epoch``
and its znode version, then in one transaction create ``/controller`` and write epoch + 1
conditionally on that version. The winner remembers the new version of ``/controller_epoch``;
**every** write it makes afterwards is a transaction that starts with ``check(/controller_epoch,
that version)``. A newer controller has changed the version, so a zombie — a controller whose
session expired while it was busy — cannot overwrite anything: its transaction fails and it
resigns (:class:`ControllerMovedError`). Partition-state writes are further conditional on the
state znode's own version, because the partition leader writes the ISR too.

Events (Kafka's ``ControllerEventManager``): ZooKeeper callbacks only put an event on a queue;
one worker thread takes them in order, so the controller's state needs no lock and kazoo's
callback thread never blocks:

* ``ELECT`` — ``/controller`` changed, the session reconnected, or startup: resign if someone else
  holds it, try to win if nobody does. Winning = ``_on_failover``: read brokers, topics,
  assignments and partition states from ZooKeeper and reconcile every partition (so a new
  controller finishes whatever the last one left half done: every action is idempotent).
* ``BROKER_CHANGE`` (``/brokers/ids`` children) — for partitions on brokers that left: elect a
  leader from the live ISR in assignment order (any live replica with unclean election), drop
  dead brokers from ISRs; partitions with no eligible leader go offline (leader -1) keeping their
  last ISR. For brokers that joined: offline partitions whose ISR holds them get a leader. A
  broker that re-registered between two looks (its znode's czxid changed: Kafka's broker epoch)
  is handled as a failure followed by a start.
* ``TOPIC_CHANGE`` (``/brokers/topics`` children) — create the state znode of each new
  partition: leader = first live replica, ISR = live replicas, leader epoch 0.
* ``PARTITION_CHANGE`` (the data of a ``/brokers/topics/<t>``: CreatePartitions extended its
  assignment; Kafka's ``PartitionModifications``) — create the states of the new partitions.
* ``TOPIC_DELETION`` (``/admin/delete_topics`` children) — delete the topic's znodes, its config
  and the request, in one fenced transaction.
* ``LOG_DIR_EVENT`` (``/log_dir_event_notification`` children; Kafka's
  ``LogDirEventNotification``) — a broker's log dir failed: read each event, remember the
  broker's offline replicas (each event replaces its previous set; ``zk_data`` has the payload),
  delete the event, and reconcile that broker's partitions with it counted as dead *for those
  partitions only*: it leaves their ISRs and, where it led, the first live ISR member in
  assignment order takes over (Kafka's ``onReplicasBecomeOffline``). A broker's offline set is
  forgotten when it re-registers (a restart re-validates its dirs) or leaves. A new controller
  knows only the events not yet deleted — the states its predecessor wrote already keep the
  offline replicas out of the ISRs, and such a replica cannot rejoin without fetching, which
  its broker does not do while the dir is offline.
* ``EXPIRE`` (session lost) — resign; ``SHUTDOWN`` — resign, delete ``/controller`` if it is ours.

* ``ISR_CHANGE`` (the state znode of a partition being reassigned) — finish the reassignments
  whose target replicas are all in the ISR.

Administration (:class:`~sluice.broker.cluster.partition_admin.PartitionAdmin`): ElectLeaders
and Alter/ListPartitionReassignments are calls queued to the worker like events (answered with
:class:`NotControllerError` unless this controller is active), so they see and change the same
context as the events, in order. Elections follow ``leader_election``; reassignments the
procedure in ``reassignment`` (KIP-455): the topic znode records RS/AR/RR, a watch on the
partition's state waits for the target to join the ISR, then leadership moves into the target,
the znode gets the target alone and the ISR drops the removed replicas. A new controller
resumes every reassignment its znodes record.

Differences from Kafka 2.x: no LeaderAndIsr/UpdateMetadata requests (brokers watch the state
znodes themselves); the leader epoch is bumped only when the leader changes (Kafka also bumps it
when the controller shrinks an ISR); no automatic preferred-leader rebalancing
(``auto.leader.rebalance.enable``): preferred leaders come back through ElectLeaders.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import queue
import threading
from collections.abc import Callable, Iterable

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from sluice.broker.cluster.controller_admin import Call, ControllerAdmin
from sluice.broker.cluster.controller_writes import (
    ControllerMovedError,
    create_partition_state,
    create_partition_states,
    fenced_commit,
    write_partition_state,
)
from sluice.broker.cluster.leader_election import (
    elect_leader,
)
from sluice.broker.cluster.partition_admin import TopicPartitionKey
from sluice.broker.cluster.reassignment import (
    ReplicaAssignment,
)
from sluice.broker.cluster.replica_assignment import assign_replicas_to_brokers
from sluice.broker.cluster.zk_data import (
    BrokerIdsZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    LogDirEventNotificationSequenceZNode,
    LogDirEventNotificationZNode,
    PartitionState,
    TopicAssignment,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicsZNode,
    TopicZNode,
    ZkDataError,
)

# Re-exported: these lived here before the controller's pure parts got modules of their own.
__all__ = [
    "Controller",
    "ControllerMovedError",
    "assign_replicas_to_brokers",
    "create_partition_state",
    "elect_leader",
    "write_partition_state",
]

log = logging.getLogger(__name__)

MAX_STATE_WRITE_ATTEMPTS = 10
# New partition states per ZooKeeper transaction: three operations of under 200 bytes each,
# well inside ZooKeeper's 1 MiB request limit (jute.maxbuffer).
STATE_CREATE_BATCH = 500
SHUTDOWN_CALL_TIMEOUT = 2.0  # seconds, each ZooKeeper call of a resignation at shutdown
STOP_WAIT_DISCONNECTED = 0.5  # seconds stop() waits for the worker while disconnected

# -- the controller ---------------------------------------------------------------------------


class _Event(enum.Enum):
    ELECT = "elect"
    BROKER_CHANGE = "broker_change"
    TOPIC_CHANGE = "topic_change"
    PARTITION_CHANGE = "partition_change"
    TOPIC_DELETION = "topic_deletion"
    ISR_CHANGE = "isr_change"
    LOG_DIR_EVENT = "log_dir_event"
    EXPIRE = "expire"
    SHUTDOWN = "shutdown"


class Controller(ControllerAdmin):
    """One broker's controller: a candidate in the election, and the cluster's controller while
    it holds ``/controller``.

    ``start``/``stop`` are called from the owner's thread; everything else runs on the
    controller's own worker thread. The read-only properties may be read from any thread.
    """

    def __init__(
        self,
        zk: KazooClient,
        broker_id: int,
        *,
        unclean_leader_election: bool = False,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.unclean_leader_election = unclean_leader_election
        self._queue: queue.Queue[_Event | Call] = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopped = False
        # Written on the worker thread only; read anywhere (single attribute reads).
        self._active = False
        self._active_controller_id = -1
        self._epoch = 0
        self._epoch_zk_version = -1
        self._needs_resync = False
        # The controller context (Kafka's ControllerContext), valid while active.
        self._live: dict[int, int] = {}  # broker id → czxid of its registration
        self._assignments: dict[str, dict[int, tuple[int, ...]]] = {}
        self._states: dict[TopicPartitionKey, PartitionState] = {}
        self._topic_znodes: dict[str, TopicAssignment] = {}
        self._moving: dict[TopicPartitionKey, ReplicaAssignment] = {}  # reassignments under way
        # Replicas on failed log dirs, per live broker (None: all of that broker's replicas).
        self._offline: dict[int, frozenset[TopicPartitionKey] | None] = {}
        self._isr_watched: set[TopicPartitionKey] = set()  # state znodes watched (any thread)
        self._watched_topics: set[str] = set()  # topic znodes with a data watch (any thread)

    # -- public, any thread ----------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._active

    @property
    def active_controller_id(self) -> int:
        """The broker id in ``/controller`` as last seen, or -1 if none."""
        return self._active_controller_id

    @property
    def epoch(self) -> int:
        """The controller epoch this controller won (meaningful while active)."""
        return self._epoch

    @property
    def epoch_zk_version(self) -> int:
        """The znode version of ``/controller_epoch`` that fences this controller's writes."""
        return self._epoch_zk_version

    def offline_replicas(self) -> dict[int, frozenset[TopicPartitionKey] | None]:
        """Replicas on failed log dirs, per broker, as this controller knows them (None: all
        of the broker's replicas; empty while not active)."""
        return dict(self._offline)

    def start(self) -> None:
        for path in (
            BrokerIdsZNode.path(),
            TopicsZNode.path(),
            DeleteTopicsZNode.path(),
            LogDirEventNotificationZNode.path(),
        ):
            self.zk.ensure_path(path)
        self._thread = threading.Thread(
            target=self._run, name=f"controller-{self.broker_id}", daemon=True
        )
        self._thread.start()
        self.zk.add_listener(self._on_session_state)
        self._put(_Event.ELECT)
        DataWatch(self.zk, ControllerZNode.path(), self._watch(_Event.ELECT))
        ChildrenWatch(self.zk, BrokerIdsZNode.path(), self._watch(_Event.BROKER_CHANGE))
        ChildrenWatch(self.zk, TopicsZNode.path(), self._watch(_Event.TOPIC_CHANGE))
        ChildrenWatch(self.zk, DeleteTopicsZNode.path(), self._watch(_Event.TOPIC_DELETION))
        ChildrenWatch(
            self.zk, LogDirEventNotificationZNode.path(), self._watch(_Event.LOG_DIR_EVENT)
        )

    def stop(self, timeout: float = 10.0) -> None:
        """Resign (deleting ``/controller`` if ours, so another broker takes over at once) and
        stop the worker. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.zk.remove_listener(self._on_session_state)
        self._queue.put(_Event.SHUTDOWN)
        if self._thread is not None:
            # A worker inside a ZooKeeper call while disconnected waits for a reconnection that
            # may never come: do not wait with it (a daemon; its call fails once the client
            # stops, and the resignation it owes is the session's end).
            self._thread.join(
                timeout if self.zk.connected else min(timeout, STOP_WAIT_DISCONNECTED)
            )

    # -- ZooKeeper callbacks (kazoo threads): enqueue only ---------------------------------

    def _put(self, event: _Event) -> None:
        if not self._stopped:
            self._queue.put(event)

    def _watch(self, event: _Event) -> Callable[..., bool | None]:
        def callback(*_args: object) -> bool | None:
            if self._stopped:
                return False  # stops the kazoo watch
            self._queue.put(event)
            return None

        return callback

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._put(_Event.EXPIRE)
        elif state == KazooState.CONNECTED:
            self._put(_Event.ELECT)

    # -- the worker ------------------------------------------------------------------------

    def _isr_changed(self) -> None:
        self._put(_Event.ISR_CHANGE)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            if event is _Event.SHUTDOWN:
                self._shutdown()
                self._refuse_queued_calls()
                return
            try:
                if isinstance(event, Call):
                    self._answer(event)
                else:
                    self._process(event)
            except ControllerMovedError as e:
                log.info("controller %d: fenced (%s); resigning", self.broker_id, e)
                self._resign()
                self._put(_Event.ELECT)
            except KazooException as e:
                # Disconnected or expired: the session listener queues ELECT or EXPIRE; state
                # missed meanwhile is re-read by a full resync at the next event.
                log.warning("controller %d: %r while handling %s", self.broker_id, e, event)
                self._needs_resync = True
            except Exception:
                log.exception("controller %d: error while handling %s", self.broker_id, event)
                self._needs_resync = True

    def _process(self, event: _Event) -> None:
        if event is _Event.ELECT:
            self._elect()
            return
        if event is _Event.EXPIRE:
            self._resign()
            self._active_controller_id = -1
            return
        if not self._active:
            return
        if self._needs_resync:
            self._load_and_reconcile()
            return
        if event is _Event.BROKER_CHANGE:
            self._on_broker_change()
        elif event is _Event.TOPIC_CHANGE:
            self._on_topic_change()
        elif event is _Event.PARTITION_CHANGE:
            self._on_partition_change()
        elif event is _Event.TOPIC_DELETION:
            self._on_topic_deletion()
        elif event is _Event.ISR_CHANGE:
            for tp in list(self._moving):
                self._maybe_complete(tp)
        elif event is _Event.LOG_DIR_EVENT:
            self._reconcile(self._on_log_dir_events())

    def _shutdown(self) -> None:
        was_active = self._active
        self._resign()
        if not was_active:
            return
        if not self.zk.connected:  # never wait for ZooKeeper: the znode goes with the session
            return
        try:  # delete /controller only if this session created it (each call bounded)
            _, stat = self.zk.get_async(ControllerZNode.path()).get(timeout=SHUTDOWN_CALL_TIMEOUT)
            if stat.ephemeralOwner == self._session_id():
                self.zk.delete_async(ControllerZNode.path(), version=stat.version).get(
                    timeout=SHUTDOWN_CALL_TIMEOUT
                )
        except (KazooException, KazooTimeoutError, ZkDataError) as e:
            log.debug("controller %d: could not delete /controller: %s", self.broker_id, e)

    def _session_id(self) -> int | None:
        client_id = self.zk.client_id
        return None if client_id is None else int(client_id[0])

    # -- election --------------------------------------------------------------------------

    def _elect(self) -> None:
        try:
            data, stat = self.zk.get(ControllerZNode.path())
        except NoNodeError:
            data, stat = None, None
        if stat is not None:
            try:
                holder = ControllerZNode.decode(data)
            except ZkDataError as e:
                log.error("controller %d: %s", self.broker_id, e)
                holder = -1
            self._active_controller_id = holder
            ours = holder == self.broker_id and stat.ephemeralOwner == self._session_id()
            if not ours and self._active:
                log.info(
                    "controller %d: broker %d is controller now; resigning", self.broker_id, holder
                )
                self._resign()
            elif ours and self._active and self._needs_resync:
                self._load_and_reconcile()
            elif ours and not self._active:
                # Ours but not acting on it (a failover that failed): hand it on.
                self.zk.delete(ControllerZNode.path(), version=stat.version)
            return
        if self._active:
            self._resign()
        self._register()

    def _register(self) -> None:
        epoch, epoch_version = self._read_epoch()
        tx = self.zk.transaction()
        tx.create(ControllerZNode.path(), ControllerZNode.encode(self.broker_id), ephemeral=True)
        tx.set_data(
            ControllerEpochZNode.path(), ControllerEpochZNode.encode(epoch + 1), epoch_version
        )
        created, epoch_stat = tx.commit()
        if isinstance(created, Exception) or isinstance(epoch_stat, Exception):
            lost = isinstance(created, NodeExistsError) or isinstance(epoch_stat, BadVersionError)
            if not lost:
                raise next(
                    r
                    for r in (created, epoch_stat)
                    if isinstance(r, Exception)
                    and not isinstance(r, (RolledBackError, RuntimeInconsistency))
                )
            try:
                data, _ = self.zk.get(ControllerZNode.path())
                self._active_controller_id = ControllerZNode.decode(data)
            except NoNodeError:  # the winner is already gone: try again
                self._put(_Event.ELECT)
            return
        self._active = True
        self._active_controller_id = self.broker_id
        self._epoch = epoch + 1
        self._epoch_zk_version = epoch_stat.version
        log.info("controller %d: elected, controller epoch %d", self.broker_id, self._epoch)
        try:
            self._load_and_reconcile()
        except ControllerMovedError:
            raise
        except KazooException:  # disconnected: stay controller, re-read all on reconnection
            self._needs_resync = True
            raise
        except Exception:
            # Kafka's triggerControllerMove: let another broker (or us, afresh) try.
            log.exception("controller %d: failover failed; moving the controller", self.broker_id)
            self._resign()
            self.zk.delete(ControllerZNode.path())

    def _read_epoch(self) -> tuple[int, int]:
        path = ControllerEpochZNode.path()
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                self.zk.create(path, ControllerEpochZNode.encode(ControllerEpochZNode.INITIAL))
            data, stat = self.zk.get(path)
        return ControllerEpochZNode.decode(data), stat.version

    def _resign(self) -> None:
        if self._active:
            log.info("controller %d: resigning (epoch %d)", self.broker_id, self._epoch)
        self._active = False
        self._needs_resync = False
        self._live.clear()
        self._assignments.clear()
        self._states.clear()
        self._topic_znodes.clear()
        self._moving.clear()
        self._offline.clear()

    # -- the context -----------------------------------------------------------------------

    def _load_and_reconcile(self) -> None:
        """Read everything from ZooKeeper and bring every partition to where it should be."""
        self._needs_resync = False
        self._live = self._read_live_brokers()
        self._assignments.clear()
        self._states.clear()
        self._topic_znodes.clear()
        self._moving.clear()
        self._offline.clear()
        self._on_topic_deletion()
        for topic in self.zk.get_children(TopicsZNode.path()):
            self._load_topic(topic)
        self._on_log_dir_events()
        self._reconcile(self._all_partitions())
        for tp in list(self._moving):  # resume what the last controller left under way
            self._maybe_complete(tp)

    def _read_live_brokers(self) -> dict[int, int]:
        live: dict[int, int] = {}
        for child in self.zk.get_children(BrokerIdsZNode.path()):
            if not child.isdigit():
                continue
            stat = self.zk.exists(f"{BrokerIdsZNode.path()}/{child}")
            if stat is not None:
                live[int(child)] = stat.czxid
        return live

    def _load_topic(self, topic: str) -> bool:
        try:
            data, _ = self.zk.get(TopicZNode.path(topic))
            assignment = TopicZNode.decode(topic, data)
        except NoNodeError:
            return False
        except ZkDataError as e:
            log.error("controller %d: ignoring topic %r: %s", self.broker_id, topic, e)
            return False
        self._assignments[topic] = dict(assignment.partitions)
        self._topic_znodes[topic] = assignment
        for tp in [tp for tp in self._moving if tp[0] == topic]:
            del self._moving[tp]
        for partition in set(assignment.adding) | set(assignment.removing):
            if partition in assignment.partitions:
                self._moving[(topic, partition)] = self._assignment_of((topic, partition))
                self._watch_isr((topic, partition))
        self._refresh_states([(topic, partition) for partition in assignment.partitions])
        if topic not in self._watched_topics:
            self._watched_topics.add(topic)
            DataWatch(self.zk, TopicZNode.path(topic), self._topic_watch(topic))
        return True

    def _topic_watch(self, topic: str) -> Callable[..., bool | None]:
        first = [True]  # kazoo calls at once with the data just loaded: nothing new

        def callback(data: bytes | None, *_args: object) -> bool | None:
            if self._stopped or data is None:  # deleted: a new topic of the name watches anew
                self._watched_topics.discard(topic)
                return False
            if first.pop() if first else False:
                return None
            self._queue.put(_Event.PARTITION_CHANGE)
            return None

        return callback

    def _on_partition_change(self) -> None:
        """Re-read the assignments and create the states of partitions that have none."""
        for topic in list(self._assignments):
            before = set(self._assignments[topic])
            if self._load_topic(topic):
                added = set(self._assignments[topic]) - before
                if added:
                    log.info("controller %d: %r gained partitions %s", self.broker_id, topic,
                             sorted(added))  # fmt: skip
                    self._reconcile([(topic, p) for p in added])
        for tp in list(self._moving):
            self._maybe_complete(tp)

    def _refresh_state(self, tp: TopicPartitionKey) -> PartitionState | None:
        try:
            data, stat = self.zk.get(TopicPartitionStateZNode.path(*tp))
            state = TopicPartitionStateZNode.decode(
                data, stat.version, topic=tp[0], partition=tp[1]
            )
        except NoNodeError:
            self._states.pop(tp, None)
            return None
        self._states[tp] = state
        return state

    def _refresh_states(self, tps: Iterable[TopicPartitionKey]) -> None:
        """:meth:`_refresh_state` of each of ``tps``, the reads pipelined: a topic of 1,000
        partitions costs about one ZooKeeper round trip, not 1,000 in a row."""
        pending = [(tp, self.zk.get_async(TopicPartitionStateZNode.path(*tp))) for tp in tps]
        for tp, result in pending:
            try:
                data, stat = result.get()
            except NoNodeError:
                self._states.pop(tp, None)
                continue
            self._states[tp] = TopicPartitionStateZNode.decode(
                data, stat.version, topic=tp[0], partition=tp[1]
            )

    def _all_partitions(self) -> list[TopicPartitionKey]:
        return [(t, p) for t, parts in self._assignments.items() for p in parts]

    # -- events ----------------------------------------------------------------------------

    def _on_broker_change(self) -> None:
        before = self._live
        after = self._read_live_brokers()
        dead = {b for b, czxid in before.items() if after.get(b) != czxid}
        born = {b for b, czxid in after.items() if before.get(b) != czxid}
        if not dead and not born:
            return
        log.info(
            "controller %d: brokers left %s, joined %s", self.broker_id, sorted(dead), sorted(born)
        )
        changed = dead | born
        affected = [
            tp
            for tp in self._all_partitions()
            if changed & set(self._assignments[tp[0]][tp[1]]) or tp not in self._states
        ]
        for tp in affected:  # our copy may be stale: the leaders write ISRs too
            self._refresh_state(tp)
        for broker in changed:  # gone, or restarted: its dirs are re-validated at startup
            self._offline.pop(broker, None)
        bounced = dead & born
        if bounced:  # failure first (leadership moves away), then startup
            self._live = {b: c for b, c in after.items() if b not in bounced}
            self._reconcile(affected)
        self._live = after
        self._reconcile(affected)

    def _on_topic_change(self) -> None:
        children = set(self.zk.get_children(TopicsZNode.path()))
        for gone in set(self._assignments) - children:
            self._forget_topic(gone)
        for topic in sorted(children - set(self._assignments)):
            if self._load_topic(topic):
                log.info("controller %d: new topic %r", self.broker_id, topic)
                self._reconcile([(topic, p) for p in self._assignments[topic]])

    def _on_log_dir_events(self) -> list[TopicPartitionKey]:
        """Take in every pending log dir event (deleting it); the partitions to reconcile."""
        parent = LogDirEventNotificationZNode.path()
        events = sorted(
            (seq, child)
            for child in self.zk.get_children(parent)
            if (seq := LogDirEventNotificationSequenceZNode.sequence(child)) is not None
        )
        touched: set[int] = set()
        for _, child in events:
            path = f"{parent}/{child}"
            try:
                data, _ = self.zk.get(path)
                broker, offline = LogDirEventNotificationSequenceZNode.decode(child, data)
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.error("controller %d: ignoring a log dir event: %s", self.broker_id, e)
                broker = None
            if broker is not None and broker in self._live:
                self._offline[broker] = offline
                touched.add(broker)
                log.warning(
                    "controller %d: broker %d reports offline replicas: %s", self.broker_id,
                    broker, "all" if offline is None else sorted(offline),
                )  # fmt: skip
            with contextlib.suppress(NoNodeError):
                self.zk.delete(path)
        affected = [
            tp for tp in self._all_partitions() if touched & set(self._assignments[tp[0]][tp[1]])
        ]
        for tp in affected:
            self._refresh_state(tp)
        return affected

    def _eligible(self, tp: TopicPartitionKey) -> set[int]:
        """The live brokers whose replica of ``tp`` is not on a failed log dir."""
        return {
            b
            for b in self._live
            if b not in self._offline
            or ((offline := self._offline[b]) is not None and tp not in offline)
        }

    def _forget_topic(self, topic: str) -> None:
        self._topic_znodes.pop(topic, None)
        for partition in self._assignments.pop(topic, {}):
            self._states.pop((topic, partition), None)
            self._moving.pop((topic, partition), None)

    def _on_topic_deletion(self) -> None:
        for topic in self.zk.get_children(DeleteTopicsZNode.path()):
            self._delete_topic(topic)

    def _delete_topic(self, topic: str) -> None:
        for _ in range(MAX_STATE_WRITE_ATTEMPTS):
            doomed = self._subtree_postorder(TopicZNode.path(topic))
            if self.zk.exists(TopicConfigZNode.path(topic)) is not None:
                doomed.append(TopicConfigZNode.path(topic))
            doomed.append(DeleteTopicsTopicZNode.path(topic))

            def build(tx: TransactionRequest, doomed: list[str] = doomed) -> None:
                for path in doomed:
                    tx.delete(path)

            try:
                fenced_commit(self.zk, self._epoch_zk_version, build)
            except (NoNodeError, NotEmptyError):  # changed under us: look again
                continue
            log.info("controller %d: deleted topic %r", self.broker_id, topic)
            self._forget_topic(topic)
            return
        log.error("controller %d: could not delete topic %r", self.broker_id, topic)

    def _subtree_postorder(self, path: str) -> list[str]:
        try:
            children = self.zk.get_children(path)
        except NoNodeError:
            return []
        result: list[str] = []
        for child in children:
            result += self._subtree_postorder(f"{path}/{child}")
        result.append(path)
        return result

    # -- partition state changes -----------------------------------------------------------

    def _reconcile(self, partitions: Iterable[TopicPartitionKey]) -> None:
        ordered = sorted(partitions)
        self._create_new_states(ordered)
        for tp in ordered:
            replicas = self._assignments.get(tp[0], {}).get(tp[1])
            if replicas is not None:
                self._reconcile_partition(tp, replicas)

    def _create_new_states(self, partitions: list[TopicPartitionKey]) -> None:
        """Create the states of those of ``partitions`` that have none (a new topic's, or
        CreatePartitions'), ``STATE_CREATE_BATCH`` per fenced transaction: their first live
        replica leads, the live replicas are the ISR — what :meth:`_reconcile_partition` would
        write one by one, at three ZooKeeper round trips each (minutes for 4,000 partitions on
        a busy machine). A batch that meets a state or parent already there is left to the
        one-by-one path, which sorts that out; so is a partition with no live replica."""
        fresh: dict[str, dict[int, tuple[int, list[int]]]] = {}
        for topic, partition in partitions:
            replicas = self._assignments.get(topic, {}).get(partition)
            live = [r for r in replicas or () if r in self._live]
            if live and (topic, partition) not in self._states:
                fresh.setdefault(topic, {})[partition] = (live[0], live)
        for topic, states in fresh.items():
            parent_missing = self.zk.exists(TopicPartitionsZNode.path(topic)) is None
            items = sorted(states.items())
            for start in range(0, len(items), STATE_CREATE_BATCH):
                batch = dict(items[start : start + STATE_CREATE_BATCH])
                try:
                    created = create_partition_states(
                        self.zk, self._epoch_zk_version, topic, batch, self._epoch,
                        create_partitions_znode=parent_missing,
                    )  # fmt: skip
                except (NodeExistsError, NoNodeError):
                    continue  # the one-by-one path decides each of them
                parent_missing = False
                self._states.update({(topic, p): state for p, state in created.items()})
                log.info("controller %d: %s: %d partition states created", self.broker_id,
                         topic, len(created))  # fmt: skip

    def _reconcile_partition(self, tp: TopicPartitionKey, replicas: tuple[int, ...]) -> None:
        """Write the state ``tp`` should have, retrying on version conflicts with the leader's
        own ISR writes. Raises :class:`ControllerMovedError` if fenced."""
        for _ in range(MAX_STATE_WRITE_ATTEMPTS):
            state = self._states.get(tp)
            try:
                if state is None:
                    live = [r for r in replicas if r in self._live]
                    if not live:  # Kafka leaves it a NewPartition until a replica starts
                        log.warning("controller %d: %s has no live replica", self.broker_id, tp)
                        return
                    self._states[tp] = create_partition_state(
                        self.zk, self._epoch_zk_version, tp[0], tp[1], live[0], live, self._epoch
                    )
                    return
                target = elect_leader(
                    state, replicas, self._eligible(tp), unclean=self.unclean_leader_election
                )
                if target is None:
                    return
                leader, leader_epoch, isr = target
                self._states[tp] = write_partition_state(
                    self.zk,
                    self._epoch_zk_version,
                    tp[0],
                    tp[1],
                    leader,
                    leader_epoch,
                    isr,
                    self._epoch,
                    state.zk_version,
                )
                log.info(
                    "controller %d: %s-%d leader %d epoch %d isr %s",
                    self.broker_id,
                    tp[0],
                    tp[1],
                    leader,
                    leader_epoch,
                    list(isr),
                )
                return
            except (BadVersionError, NodeExistsError, NoNodeError):
                if self.zk.exists(TopicZNode.path(tp[0])) is None:
                    self._forget_topic(tp[0])
                    return
                self._refresh_state(tp)
        log.error("controller %d: gave up updating %s after conflicts", self.broker_id, tp)
