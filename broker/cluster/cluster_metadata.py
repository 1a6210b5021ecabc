"""``ClusterMetadata``: one broker's view of a ZooKeeper-coordinated cluster.

It is the cluster-mode :class:`~sluice.broker.cluster.topic_metadata.MetadataStore` plus what
replication needs (live brokers, replicas, partition states, the leader's conditional ISR write).

What it does with ZooKeeper (layout in ``zk_data``):

* ``start()``: make sure the persistent paths exist, read or create ``/cluster/id``, register
  ``/brokers/ids/<id>`` (ephemeral), start this broker's :class:`Controller`, set the watches.
* Watches keep an in-memory view so that every read (``partition_state`` and friends, called on
  every request) is a dict lookup: children of ``/brokers/ids`` and ``/brokers/topics``, the data
  of each known topic znode and of each of its partition state znodes, and the children of
  ``/config/changes``: a new ``config_change_<seq>`` naming ``topics/<t>`` makes the broker
  re-read ``/config/topics/<t>`` (Kafka's ``ZkConfigChangeNotificationListener``), so an
  altered topic config reaches every broker's replicas live.
* Topic administration beyond creation: ``alter_topic_config`` writes the config znode and a
  change notification (Kafka's ``AdminZkClient.changeTopicConfig``); ``create_partitions``
  extends the topic znode's assignment (``AdminZkClient.addPartitions``) and the controller,
  which watches every topic znode, creates the new partitions' states.
* Registration and the session (``broker_registration``): session expiry deletes the
  ephemeral registration; when kazoo reconnects with a new session the broker registers again,
  re-reads the states of the partitions it led, and every listener is told to re-read
  everything (``None``). :meth:`session_intact` is False from a suspended connection until
  then: the replica manager takes no acks=0/1 produce request as leader meanwhile (the narrowing of
  Kafka's ``acks=1`` loss explained there). :meth:`stop` never waits for a ZooKeeper that is
  down: deregistration is skipped when not connected (the znode goes with the session).
* Log dir failures: :meth:`report_offline_replicas` writes a
  ``/log_dir_event_notification/log_dir_event_<seq>`` (Kafka's ``propagateLogDirEvent``) naming
  this broker's offline replicas; the controller moves their leadership away and drops them
  from the ISRs. The last report is written again after a re-registration (the controller
  forgets a broker's offline replicas when it re-registers).
* ``partition_admin`` (ElectLeaders, reassignments) is this broker's controller: it answers
  while active, NOT_CONTROLLER otherwise.

Threads: kazoo's callbacks only queue events; one worker thread (``cluster-metadata-<id>``)
reads ZooKeeper, updates the view and calls the listeners. Reads of the view are safe from any
thread (the view's dicts are only replaced or updated under a lock; single lookups need none).
``create_topic``, ``delete_topic``, ``alter_topic_config``, ``create_partitions``,
``update_isr``, ``next_producer_id`` and ``report_offline_replicas`` talk to ZooKeeper
synchronously from the caller's thread (they block; call them off the event loop).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import queue
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat
from kazoo.recipe.watchers import ChildrenWatch, DataWatch

from sluice.broker.cluster.added_partitions import added_partitions
from sluice.broker.cluster.broker_registration import (
    BrokerRegistration,
    BrokerRegistrationError,
)
from sluice.broker.cluster.controller import Controller
from sluice.broker.cluster.data_watches import DataWatches
from sluice.broker.cluster.partition_admin import PartitionAdmin
from sluice.broker.cluster.producer_id_manager import ProducerIdManager
from sluice.broker.cluster.topic_metadata import (
    InvalidConfigError,
    InvalidPartitionsError,
    TopicExistsError,
    TopicInfo,
    UnknownTopicError,
)
from sluice.broker.cluster.zk_data import (
    NO_LEADER,
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerInfo,
    ClusterIdZNode,
    ConfigChangeNotificationZNode,
    ConfigChangesZNode,
    DeleteTopicsTopicZNode,
    LogDirEventNotificationSequenceZNode,
    PartitionState,
    ProducerIdBlockZNode,
    TopicConfigZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
    ZkDataError,
)
from sluice.common.topic_partition import validate_topic

__all__ = [
    "NO_LEADER",
    "BrokerInfo",
    "BrokerRegistrationError",
    "ClusterMetadata",
    "PartitionState",
]

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_TOPIC_ID_NAMESPACE = uuid.UUID("7c1a3e52-5d8e-4b1e-9a57-3f0f6c2d9b10")

Listener = Callable[[set[tuple[str, int]] | None], None]
# ZooKeeper could not be asked (the session listener recovers; the caller retries later).
_UNREACHABLE = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


@dataclass
class _TopicView:
    """What the view knows of one topic; replaced, never mutated, once published."""

    info: TopicInfo
    replicas: dict[int, tuple[int, ...]]


class ClusterMetadata:
    """One broker's cluster membership and metadata view. See the module docstring."""

    def __init__(
        self,
        zk: KazooClient,
        broker_id: int,
        *,
        listener_host: str,
        listener_port: int,
        inter_broker_listener: str = "PLAINTEXT",
        rack: str | None = None,
        default_replication_factor: int = 1,
        num_partitions: int = 1,
        unclean_leader_election: bool = False,
        registration_timeout: float = 10.0,
    ) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.listener_host = listener_host
        self.listener_port = listener_port
        # Other brokers' registrations are read at this listener's endpoint (replication).
        self.inter_broker_listener = inter_broker_listener
        self.endpoints: tuple[tuple[str, str, str, int], ...] = ()
        self.rack = rack
        self.default_replication_factor = default_replication_factor
        self.num_partitions = num_partitions
        self.registration = BrokerRegistration(zk, broker_id, timeout=registration_timeout)
        self.controller = Controller(zk, broker_id, unclean_leader_election=unclean_leader_election)
        self.partition_admin: PartitionAdmin = self.controller
        self.cluster_id = ""
        self._lock = threading.Lock()
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, _TopicView] = {}
        self._states: dict[tuple[str, int], PartitionState] = {}
        self._state_czxid: dict[tuple[str, int], int] = {}
        # Worker-thread bookkeeping: the generation of each watched topic (a watch whose
        # generation is not current belongs to a deleted incarnation and stops itself).
        self._topic_gen: dict[str, int] = {}
        self._state_watched: set[tuple[str, int]] = set()
        # The partition states' watches: pipelined reads (kazoo's DataWatch reads one by one).
        self._state_watches = DataWatches(zk)
        self._next_gen = 0
        self._listeners: list[Listener] = []
        self._events: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._started = False
        self._stopped = False
        self._producer_ids = ProducerIdManager(zk, broker_id)
        # This broker's offline replicas as last reported (None: never reported).
        self._offline_reported: frozenset[tuple[str, int]] | None = None
        self._report_lock = threading.Lock()
        # The last config change notification handled (None until the first look, which
        # only takes the current last: configs are read with each topic anyway).
        self._config_seq: int | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        for path in (*PERSISTENT_PATHS, ProducerIdBlockZNode.path()):
            self.zk.ensure_path(path)
        self.cluster_id = self._cluster_id()
        self._register()
        self.registration.mark_registered()
        self._started = True
        self._worker = threading.Thread(
            target=self._run, name=f"cluster-metadata-{self.broker_id}", daemon=True
        )
        self._worker.start()
        self.zk.add_listener(self._on_session_state)
        self.controller.start()
        ChildrenWatch(self.zk, BrokerIdsZNode.path(), self._children_watch("brokers"))
        ChildrenWatch(self.zk, TopicsZNode.path(), self._children_watch("topics"))
        ChildrenWatch(self.zk, ConfigChangesZNode.path(), self._children_watch("config_changes"))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the controller (handing it on), deregister, stop the worker. Does not close the
        kazoo client (the caller owns it). Idempotent; works on a closed client; returns within
        about a second while ZooKeeper is unreachable (nothing to hand over: the session's
        end removes the registration and ``/controller``)."""
        if self._stopped:
            return
        self._stopped = True
        self.zk.remove_listener(self._on_session_state)
        self._state_watches.close()
        self.controller.stop(timeout)
        self._events.put(("stop",))
        if self._worker is not None:  # as the controller's: not waiting on a ZooKeeper down
            self._worker.join(timeout if self.zk.connected else min(timeout, 0.5))
        if self._started:
            self.registration.deregister()

    def add_listener(self, callback: Listener) -> None:
        """Call ``callback`` on the metadata worker thread after each change (``ClusterView``)."""
        self._listeners.append(callback)

    # -- reads (any thread) ----------------------------------------------------------------

    def session_intact(self) -> bool:
        """Whether this broker may act as a partition leader: registered under a session it
        knows ZooKeeper holds (see ``broker_registration``)."""
        return self.registration.session_intact

    def controller_id(self) -> int:  # -1 while there is none
        return self.controller.active_controller_id

    def brokers(self) -> dict[int, BrokerInfo]:
        with self._lock:
            return dict(self._brokers)

    def topics(self) -> dict[str, TopicInfo]:
        with self._lock:
            return {name: view.info for name, view in self._topics.items()}

    def get(self, name: str) -> TopicInfo | None:
        view = self._topics.get(name)
        return None if view is None else view.info

    def replicas(self, topic: str, partition: int) -> tuple[int, ...]:
        """The partition's replicas in preference order; ``()`` if unknown."""
        view = self._topics.get(topic)
        return () if view is None else view.replicas.get(partition, ())

    def partition_state(self, topic: str, partition: int) -> PartitionState | None:
        return self._states.get((topic, partition))

    # -- writes (caller's thread) ----------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        config: dict[str, str],
        *,
        internal: bool = False,
        validate_only: bool = False,
        assignment: Sequence[Sequence[int]] | None = None,
    ) -> TopicInfo:
        """Assign replicas over the live brokers (or take ``assignment``'s, checked as for new
        partitions: distinct live brokers, ``replication_factor`` each) and write
        ``/brokers/topics/<name>`` and ``/config/topics/<name>`` in one transaction; the
        controller creates the partition states. ``partitions``/``replication_factor`` of -1
        mean the broker defaults."""
        validate_topic(name)
        partitions = self.num_partitions if partitions == -1 else partitions
        if replication_factor == -1:
            replication_factor = self.default_replication_factor
        if partitions < 1:
            raise InvalidPartitionsError(f"expected at least 1 partition, found {partitions}")
        bad = {k: v for k, v in config.items() if not isinstance(k, str) or not isinstance(v, str)}
        if bad:
            raise InvalidConfigError(f"expected string config keys and values, found {bad!r}")
        existing = self.zk.get_children(TopicsZNode.path())
        if name in existing:
            raise TopicExistsError(f"topic {name!r} already exists")
        collides = [t for t in existing if t.replace(".", "_") == name.replace(".", "_")]
        if collides:
            raise TopicExistsError(f"topic {name!r} collides with existing {collides[0]!r}")
        if self.zk.exists(DeleteTopicsTopicZNode.path(name)) is not None:
            raise TopicExistsError(f"topic {name!r} is marked for deletion")
        live = self._read_brokers()
        replicas = added_partitions(live, 0, partitions, replication_factor, assignment)
        internal = internal or name in INTERNAL_TOPICS
        info = TopicInfo(name, partitions, replication_factor, dict(config), internal=internal)
        if validate_only:
            return info
        tx = self.zk.transaction()
        tx.create(
            TopicZNode.path(name),
            TopicZNode.encode(replicas, info.topic_id, internal=internal),
        )
        config_path = TopicConfigZNode.path(name)
        if self.zk.exists(config_path) is None:
            tx.create(config_path, TopicConfigZNode.encode(config))
        else:  # left over from an earlier topic of this name
            tx.set_data(config_path, TopicConfigZNode.encode(config))
        results = tx.commit()
        if isinstance(results[0], NodeExistsError):
            raise TopicExistsError(f"topic {name!r} already exists")
        failure = next((r for r in results if isinstance(r, KazooException)), None)
        if failure is not None and not isinstance(failure, NodeExistsError):
            raise failure
        if isinstance(results[1], NodeExistsError):  # a config appeared meanwhile: again
            return self.create_topic(
                name, partitions, replication_factor, config, internal=internal,
                assignment=assignment,
            )  # fmt: skip
        with self._lock:  # visible at once to this broker; the watch confirms it later
            self._topics.setdefault(name, _TopicView(info, dict(replicas)))
        log.info("broker %d: created topic %r: %s", self.broker_id, name, replicas)
        return info

    def delete_topic(self, name: str) -> TopicInfo:
        """Request the deletion (``/admin/delete_topics/<name>``); the controller carries it out.
        Raises :class:`UnknownTopicError` if there is no such topic."""
        info = self._read_topic(name)
        if info is None:
            raise UnknownTopicError(f"topic {name!r} does not exist")
        with contextlib.suppress(NodeExistsError):  # NodeExists: already requested
            self.zk.create(DeleteTopicsTopicZNode.path(name), DeleteTopicsTopicZNode.encode())
        return info.info

    def alter_topic_config(self, name: str, config: dict[str, str]) -> TopicInfo:
        """Write ``/config/topics/<name>`` and a change notification, as Kafka's
        ``AdminZkClient.changeTopicConfig``; every broker re-reads the config when it sees
        the notification. ``UnknownTopicError`` if there is no topic."""
        view = self._read_topic(name)
        if view is None:
            raise UnknownTopicError(f"topic {name!r} does not exist")
        path = TopicConfigZNode.path(name)
        data = TopicConfigZNode.encode(config)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        self.zk.create(
            ConfigChangeNotificationZNode.path_prefix(),
            ConfigChangeNotificationZNode.encode_topic(name),
            sequence=True,
            makepath=True,
        )
        info = dataclasses.replace(view.info, config=dict(config))
        with self._lock:
            current = self._topics.get(name)
            if current is not None:
                self._topics[name] = _TopicView(info, current.replicas)
        self._events.put(("notify", {(name, p) for p in view.replicas}))
        log.info("broker %d: altered the config of topic %r: %s", self.broker_id, name, config)
        return info

    def create_partitions(
        self,
        name: str,
        total: int,
        assignment: Sequence[Sequence[int]] | None,
        *,
        validate_only: bool = False,
    ) -> TopicInfo:
        """Extend ``/brokers/topics/<name>`` with partitions up to ``total`` (conditional on its
        znode version), replicas assigned over the live brokers as for a new topic unless
        ``assignment`` gives them (Kafka's ``AdminZkClient.addPartitions``). The controller
        creates their states; every broker's view picks them up through the topic's watch."""
        for _ in range(10):
            try:
                data, stat = self.zk.get(TopicZNode.path(name))
            except NoNodeError:
                raise UnknownTopicError(f"topic {name!r} does not exist") from None
            current = TopicZNode.decode(name, data)
            existing = len(current.partitions)
            if total <= existing:
                raise InvalidPartitionsError(
                    f"Topic currently has {existing} partitions, which is higher than or equal "
                    f"to the requested {total}."
                )
            replication = len(current.partitions[0])
            live = self._read_brokers()
            added = added_partitions(live, existing, total - existing, replication, assignment)
            partitions = {**current.partitions, **added}
            view = self._topic_view(name, data, stat)
            info = dataclasses.replace(view.info, partitions=total)
            if validate_only:
                return info
            encoded = TopicZNode.encode(
                partitions, current.topic_id, internal=current.internal,
                adding=current.adding, removing=current.removing,
            )  # fmt: skip
            try:
                self.zk.set(TopicZNode.path(name), encoded, version=stat.version)
            except BadVersionError:
                continue  # changed meanwhile: read it again
            log.info("broker %d: topic %r grown to %d partitions: %s",
                     self.broker_id, name, total, added)  # fmt: skip
            return info
        raise InvalidPartitionsError(f"topic {name!r} kept changing while adding partitions")

    def update_isr(
        self,
        topic: str,
        partition: int,
        leader_epoch: int,
        isr: Sequence[int],
        zk_version: int,
    ) -> PartitionState | None:
        """The partition leader's ISR change, written only if the state znode is still at
        ``zk_version`` and names this broker as leader at ``leader_epoch`` (Kafka 2.x
        ``Partition.updateIsr``). Returns the new state, or ``None`` if the state moved or
        ZooKeeper is unreachable (one line logged) — the caller decides again later."""
        if self.broker_id not in isr:
            raise ValueError(f"the leader {self.broker_id} must be in the ISR, found {list(isr)}")
        path = TopicPartitionStateZNode.path(topic, partition)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        except _UNREACHABLE as e:
            log.warning(
                "broker %d: ISR of %s-%d not written: %r", self.broker_id, topic, partition, e
            )
            return None
        if stat.version != zk_version:
            return None
        current = TopicPartitionStateZNode.decode(
            data, stat.version, topic=topic, partition=partition
        )
        if current.leader != self.broker_id or current.leader_epoch != leader_epoch:
            return None
        new_data = TopicPartitionStateZNode.encode(
            self.broker_id, leader_epoch, isr, current.controller_epoch
        )
        try:
            new_stat = self.zk.set(path, new_data, version=zk_version)
        except (BadVersionError, NoNodeError):
            return None
        except _UNREACHABLE as e:  # written or not: the state's watch tells
            log.warning(
                "broker %d: ISR of %s-%d not written: %r", self.broker_id, topic, partition, e
            )
            return None
        state = PartitionState(
            self.broker_id, leader_epoch, tuple(isr), current.controller_epoch, new_stat.version
        )
        if self._apply_state(topic, partition, state, new_stat):  # listeners hear of it too
            self._events.put(("notify", {(topic, partition)}))
        return state

    def report_offline_replicas(self, partitions: frozenset[tuple[str, int]]) -> None:
        """Tell the controller that ``partitions`` (every one, not only new ones) are this
        broker's offline replicas now: a log dir event znode (see the module docstring).
        Blocks on ZooKeeper; raises what kazoo raises (the caller retries)."""
        with self._report_lock:
            self.zk.create(
                LogDirEventNotificationSequenceZNode.path_prefix(),
                LogDirEventNotificationSequenceZNode.encode(self.broker_id, sorted(partitions)),
                sequence=True,
                makepath=True,
            )
            self._offline_reported = partitions
        if partitions:
            log.warning("broker %d: reported offline replicas to the controller: %s",
                        self.broker_id, sorted(partitions))  # fmt: skip
        else:
            log.info("broker %d: reported to the controller that no replica is offline",
                     self.broker_id)  # fmt: skip

    def next_producer_id(self) -> int:
        """A producer id no other broker hands out (``producer_id_manager``)."""
        return self._producer_ids.next_producer_id()

    # -- ZooKeeper helpers -----------------------------------------------------------------

    def _cluster_id(self) -> str:
        path = ClusterIdZNode.path()
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            with contextlib.suppress(NodeExistsError):
                self.zk.create(path, ClusterIdZNode.encode(ClusterIdZNode.generate()))
            data, _ = self.zk.get(path)
        return ClusterIdZNode.decode(data)

    def _register(self) -> None:
        self.registration.register(
            self.listener_host, self.listener_port, self.rack, self.endpoints
        )

    def _read_brokers(self) -> dict[int, BrokerInfo]:
        brokers: dict[int, BrokerInfo] = {}
        for child in self.zk.get_children(BrokerIdsZNode.path()):
            if not child.isdigit():
                continue
            try:
                data, _ = self.zk.get(BrokerIdZNode.path(int(child)))
                brokers[int(child)] = BrokerIdZNode.decode(
                    int(child), data, self.inter_broker_listener
                )
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.error("broker %d: ignoring a registration: %s", self.broker_id, e)
        return brokers

    def _read_topic(self, name: str) -> _TopicView | None:
        try:
            data, stat = self.zk.get(TopicZNode.path(name))
        except NoNodeError:
            return None
        return self._topic_view(name, data, stat)

    def _topic_view(self, name: str, data: bytes, stat: ZnodeStat) -> _TopicView:
        assignment = TopicZNode.decode(name, data)
        try:
            config_data, _ = self.zk.get(TopicConfigZNode.path(name))
            config = TopicConfigZNode.decode(name, config_data)
        except NoNodeError:
            config = {}
        # A topic made without a topic_id (by older tools) gets one every broker agrees on.
        topic_id = assignment.topic_id or uuid.uuid5(_TOPIC_ID_NAMESPACE, f"{name}/{stat.czxid}")
        replicas = assignment.partitions
        info = TopicInfo(
            name=name,
            partitions=len(replicas),
            replication_factor=len(replicas[0]),
            config=config,
            topic_id=topic_id,
            internal=assignment.internal or name in INTERNAL_TOPICS,
        )
        return _TopicView(info, dict(replicas))

    # -- kazoo callbacks: queue only -------------------------------------------------------

    def _children_watch(self, kind: str) -> Callable[[list[str]], bool | None]:
        def callback(children: list[str]) -> bool | None:
            if self._stopped:
                return False
            self._events.put((kind, list(children)))
            return None

        return callback

    def _on_session_state(self, state: str) -> None:
        action = self.registration.on_state(state)
        if action is not None:
            self._events.put((action,))

    # -- the worker ------------------------------------------------------------------------

    def _run(self) -> None:
        held: tuple[Any, ...] | None = None  # taken from the queue by a burst, not yet handled
        while True:
            event, held = held or self._events.get(), None
            kind = event[0]
            if kind == "stop":
                return
            try:
                changed = self._handle(event)
                # A new topic's states come in a burst: the queued ones notified as one set.
                while kind == "state" and changed is not None and held is None:
                    with contextlib.suppress(queue.Empty):
                        held = self._events.get_nowait()
                    if held is None or held[0] != "state":
                        break
                    changed |= self._handle(held) or set()
                    held = None
            except KazooException as e:
                log.warning("broker %d: %r while handling %s", self.broker_id, e, kind)
                continue
            except Exception:
                log.exception("broker %d: error while handling %s", self.broker_id, kind)
                continue
            if changed is None or changed:
                self._notify(changed)

    def _notify(self, changed: set[tuple[str, int]] | None) -> None:
        for listener in list(self._listeners):
            try:
                listener(None if changed is None else set(changed))
            except Exception:
                log.exception("broker %d: metadata listener failed", self.broker_id)

    def _handle(self, event: tuple[Any, ...]) -> set[tuple[str, int]] | None:
        kind = event[0]
        if kind == "brokers":
            return self._on_brokers()
        if kind == "topics":
            return self._on_topics(set(event[1]))
        if kind == "topic_data":
            _, topic, gen, data, stat = event
            return self._on_topic_data(topic, gen, data, stat)
        if kind == "state":
            _, topic, partition, gen, data, stat = event
            return self._on_state(topic, partition, gen, data, stat)
        if kind == "config_changes":
            return self._on_config_changes(event[1])
        if kind == "notify":
            return set(event[1])
        if kind == "reregister":
            self._register()
            self._refresh()
            self._reread_led_states()
            offline = self._offline_reported
            if offline:  # the controller forgot them with the old registration
                self.report_offline_replicas(offline)
            self.registration.mark_rejoined()
            return None
        if kind == "refresh":
            return self._refresh()
        raise AssertionError(f"unknown event {kind!r}")

    def _refresh(self) -> set[tuple[str, int]]:
        """Re-read what the children watches cover (the data watches re-read themselves)."""
        changed = self._on_brokers()
        return changed | self._on_topics(set(self.zk.get_children(TopicsZNode.path())))

    def _reread_led_states(self) -> None:
        """Re-read the state of every partition the view says this broker leads: a new
        session may have missed the election that deposed it."""
        with self._lock:
            led = [tp for tp, s in self._states.items() if s.leader == self.broker_id]
        for topic, partition in led:
            try:
                data, stat = self.zk.get(TopicPartitionStateZNode.path(topic, partition))
                state = TopicPartitionStateZNode.decode(
                    data, stat.version, topic=topic, partition=partition
                )
            except NoNodeError:
                continue
            self._apply_state(topic, partition, state, stat)

    def _partitions_on(self, brokers: Iterable[int]) -> set[tuple[str, int]]:
        wanted = set(brokers)
        with self._lock:
            topics = list(self._topics.items())
        return {
            (name, p)
            for name, view in topics
            for p, replicas in view.replicas.items()
            if wanted & set(replicas)
        }

    def _on_brokers(self) -> set[tuple[str, int]]:
        brokers = self._read_brokers()
        with self._lock:
            before = self._brokers
            self._brokers = brokers
        changed = {b for b in before.keys() | brokers.keys() if before.get(b) != brokers.get(b)}
        return self._partitions_on(changed)

    def _on_topics(self, children: set[str]) -> set[tuple[str, int]]:
        changed: set[tuple[str, int]] = set()
        for gone in set(self._topic_gen) - children:
            del self._topic_gen[gone]
            self._state_watched = {tp for tp in self._state_watched if tp[0] != gone}
            changed |= self._drop_topic(gone)
        for topic in children - set(self._topic_gen):
            self._next_gen += 1
            gen = self._topic_gen[topic] = self._next_gen
            DataWatch(self.zk, TopicZNode.path(topic), self._topic_data_watch(topic, gen))
        return changed

    def _on_config_changes(self, children: list[str]) -> set[tuple[str, int]]:
        """Re-read the config of every topic named by a notification newer than the last."""
        numbered = sorted(
            (seq, child)
            for child in children
            if (seq := ConfigChangeNotificationZNode.sequence(child)) is not None
        )
        if self._config_seq is None:
            self._config_seq = numbered[-1][0] if numbered else -1
            return set()
        changed: set[tuple[str, int]] = set()
        for seq, child in numbered:
            if seq <= self._config_seq:
                continue
            self._config_seq = seq
            try:
                data, _ = self.zk.get(f"{ConfigChangesZNode.path()}/{child}")
                kind, name = ConfigChangeNotificationZNode.decode(child, data)
            except NoNodeError:
                continue
            except ZkDataError as e:
                log.error("broker %d: ignoring a config change: %s", self.broker_id, e)
                continue
            if kind != "topics":
                continue
            try:
                config_data, _ = self.zk.get(TopicConfigZNode.path(name))
                config = TopicConfigZNode.decode(name, config_data)
            except NoNodeError:
                config = {}
            except ZkDataError as e:
                log.error("broker %d: ignoring the config of %r: %s", self.broker_id, name, e)
                continue
            with self._lock:
                view = self._topics.get(name)
                if view is None:
                    continue
                self._topics[name] = _TopicView(
                    dataclasses.replace(view.info, config=config), view.replicas
                )
            changed |= {(name, p) for p in view.replicas}
        return changed

    def _drop_topic(self, topic: str) -> set[tuple[str, int]]:
        with self._lock:
            view = self._topics.pop(topic, None)
            gone = {tp for tp in self._states if tp[0] == topic}
            for tp in gone:
                del self._states[tp]
                self._state_czxid.pop(tp, None)
        return gone | ({(topic, p) for p in view.replicas} if view else set())

    def _topic_data_watch(self, topic: str, gen: int) -> Callable[..., bool | None]:
        def callback(
            data: bytes | None, stat: ZnodeStat | None, event: object = None
        ) -> bool | None:
            if self._stopped or self._topic_gen.get(topic) != gen:
                return False
            self._events.put(("topic_data", topic, gen, data, stat))
            return None

        return callback

    def _state_watch(self, topic: str, partition: int, gen: int) -> Callable[..., bool | None]:
        def callback(
            data: bytes | None, stat: ZnodeStat | None, event: object = None
        ) -> bool | None:
            if self._stopped or self._topic_gen.get(topic) != gen:
                return False
            self._events.put(("state", topic, partition, gen, data, stat))
            return None

        return callback

    def _on_topic_data(
        self, topic: str, gen: int, data: bytes | None, stat: ZnodeStat | None
    ) -> set[tuple[str, int]]:
        if self._topic_gen.get(topic) != gen:
            return set()
        if data is None or stat is None:  # deleted (the children watch will follow)
            return self._drop_topic(topic)
        try:
            view = self._topic_view(topic, data, stat)
        except ZkDataError as e:
            log.error("broker %d: ignoring topic %r: %s", self.broker_id, topic, e)
            return set()
        with self._lock:
            self._topics[topic] = view
        for partition in view.replicas:
            if (topic, partition) not in self._state_watched:
                self._state_watched.add((topic, partition))
                self._state_watches.add(
                    TopicPartitionStateZNode.path(topic, partition),
                    self._state_watch(topic, partition, gen),
                )
        return {(topic, p) for p in view.replicas}

    def _on_state(
        self, topic: str, partition: int, gen: int, data: bytes | None, stat: ZnodeStat | None
    ) -> set[tuple[str, int]]:
        if self._topic_gen.get(topic) != gen:
            return set()
        tp = (topic, partition)
        if data is None or stat is None:
            with self._lock:
                existed = self._states.pop(tp, None) is not None
                self._state_czxid.pop(tp, None)
            return {tp} if existed else set()
        try:
            state = TopicPartitionStateZNode.decode(
                data, stat.version, topic=topic, partition=partition
            )
        except ZkDataError as e:
            log.error("broker %d: ignoring a partition state: %s", self.broker_id, e)
            return set()
        return {tp} if self._apply_state(topic, partition, state, stat) else set()

    def _apply_state(
        self, topic: str, partition: int, state: PartitionState, stat: ZnodeStat
    ) -> bool:
        """Publish ``state`` unless the view already has a newer version of the same znode."""
        tp = (topic, partition)
        with self._lock:
            cached = self._states.get(tp)
            same_znode = self._state_czxid.get(tp) == stat.czxid
            if cached is not None and same_znode and cached.zk_version >= state.zk_version:
                return False
            self._states[tp] = state
            self._state_czxid[tp] = stat.czxid
            return True
