"""``ControllerAdmin``: the :class:`~sluice.broker.cluster.partition_admin.PartitionAdmin`
half of the :class:`~sluice.broker.cluster.controller.Controller` — ElectLeaders (KIP-460) and
Alter/ListPartitionReassignments (KIP-455) — kept apart from the events it shares a worker with.

A mixin over the controller's context (the attributes declared below, owned by ``Controller``).
The public methods run on any thread: each queues a :class:`Call` to the controller's worker,
which runs it between events (so it sees and changes the same context, in order) and answers
through a future — with :class:`NotControllerError` unless the controller is active. Everything
else runs on the worker thread.

Reassignment follows ``reassignment``'s procedure: the topic znode records RS/AR/RR; a data
watch on the partition's state znode (``_watch_isr``) makes the worker look again whenever the
ISR changes; once the ISR holds the whole target, ``_finish`` moves leadership into the target
(``leader_election.reassignment_leader``), writes the target as the assignment, and reconciles
the partition, which drops the removed replicas from the ISR. Each step is idempotent and read
back from ZooKeeper, so a new controller finishes what an old one began.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError
from kazoo.recipe.watchers import DataWatch

from sluice.broker.cluster.controller_writes import (
    ControllerMovedError,
    write_partition_state,
    write_topic_assignment,
)
from sluice.broker.cluster.leader_election import (
    ElectionOutcome,
    ElectionType,
    admin_election,
    reassignment_leader,
)
from sluice.broker.cluster.partition_admin import NotControllerError, TopicPartitionKey
from sluice.broker.cluster.reassignment import (
    InvalidReassignmentError,
    ReplicaAssignment,
    validate_target,
)
from sluice.broker.cluster.zk_data import (
    PartitionState,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
    ZkDataError,
)
from sluice.broker.protocol.errors import Errors

__all__ = ["Call", "ControllerAdmin"]

log = logging.getLogger(__name__)

MAX_WRITE_ATTEMPTS = 10


@dataclass
class Call:
    """An administrative call queued to the worker, answered through ``future``."""

    run: Callable[[], Any]
    future: concurrent.futures.Future[Any] = field(default_factory=concurrent.futures.Future)


class ControllerAdmin:
    """ElectLeaders and partition reassignment for ``Controller``; see the module docstring."""

    # The controller's context (``Controller.__init__`` sets them; worker thread only).
    zk: KazooClient
    broker_id: int
    _queue: queue.Queue[Any]
    _stopped: bool
    _active: bool
    _active_controller_id: int
    _needs_resync: bool
    _epoch: int
    _epoch_zk_version: int
    _live: dict[int, int]
    _assignments: dict[str, dict[int, tuple[int, ...]]]
    _states: dict[TopicPartitionKey, PartitionState]
    _topic_znodes: dict[str, TopicAssignment]
    _moving: dict[TopicPartitionKey, ReplicaAssignment]
    _isr_watched: set[TopicPartitionKey]

    # The controller's own steps (``Controller`` overrides every one of them).
    def _load_and_reconcile(self) -> None:
        raise NotImplementedError

    def _load_topic(self, topic: str) -> bool:
        raise NotImplementedError

    def _refresh_state(self, tp: TopicPartitionKey) -> PartitionState | None:
        raise NotImplementedError

    def _all_partitions(self) -> list[TopicPartitionKey]:
        raise NotImplementedError

    def _reconcile_partition(self, tp: TopicPartitionKey, replicas: tuple[int, ...]) -> None:
        raise NotImplementedError

    def _isr_changed(self) -> None:
        raise NotImplementedError

    # -- administration (PartitionAdmin), any thread: queued to the worker -----------------

    def elect_leaders(
        self,
        election: ElectionType,
        partitions: Collection[TopicPartitionKey] | None,
        timeout: float,
    ) -> dict[TopicPartitionKey, ElectionOutcome]:
        result: dict[TopicPartitionKey, ElectionOutcome] = self._call(
            lambda: self._elect_leaders(election, partitions), timeout
        )
        return result

    def alter_reassignments(
        self, targets: Mapping[TopicPartitionKey, Sequence[int] | None], timeout: float
    ) -> dict[TopicPartitionKey, tuple[Errors, str | None]]:
        result: dict[TopicPartitionKey, tuple[Errors, str | None]] = self._call(
            lambda: {tp: self._reassign(tp, t) for tp, t in targets.items()}, timeout
        )
        return result

    def list_reassignments(
        self, partitions: Collection[TopicPartitionKey] | None, timeout: float
    ) -> dict[TopicPartitionKey, ReplicaAssignment]:
        def listing() -> dict[TopicPartitionKey, ReplicaAssignment]:
            wanted = None if partitions is None else set(partitions)
            return {
                tp: a for tp, a in sorted(self._moving.items()) if wanted is None or tp in wanted
            }

        result: dict[TopicPartitionKey, ReplicaAssignment] = self._call(listing, timeout)
        return result

    def _call(self, run: Callable[[], Any], timeout: float) -> Any:
        if self._stopped:
            raise NotControllerError(f"broker {self.broker_id} is shutting down")
        call = Call(run)
        self._queue.put(call)
        try:
            return call.future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the controller did not answer within {timeout:.1f} s") from None

    def _answer(self, call: Call) -> None:
        if not call.future.set_running_or_notify_cancel():
            return
        if not self._active:
            call.future.set_exception(NotControllerError(
                f"broker {self.broker_id} is not the controller; broker "
                f"{self._active_controller_id} is"
            ))  # fmt: skip
            return
        try:
            if self._needs_resync:
                self._load_and_reconcile()
            call.future.set_result(call.run())
        except ControllerMovedError as e:
            call.future.set_exception(NotControllerError(str(e)))
            raise
        except Exception as e:
            call.future.set_exception(e)
            raise

    def _refuse_queued_calls(self) -> None:
        with contextlib.suppress(queue.Empty):
            while True:
                leftover = self._queue.get_nowait()
                if isinstance(leftover, Call) and leftover.future.set_running_or_notify_cancel():
                    leftover.future.set_exception(NotControllerError("shutting down"))

    # -- ElectLeaders (KIP-460) ------------------------------------------------------------

    def _elect_leaders(
        self, election: ElectionType, partitions: Collection[TopicPartitionKey] | None
    ) -> dict[TopicPartitionKey, ElectionOutcome]:
        wanted = self._all_partitions() if partitions is None else sorted(set(partitions))
        return {tp: self._elect_one(election, tp) for tp in wanted}

    def _elect_one(self, election: ElectionType, tp: TopicPartitionKey) -> ElectionOutcome:
        replicas = self._assignments.get(tp[0], {}).get(tp[1])
        if replicas is None:
            return ElectionOutcome(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
            )
        for _ in range(MAX_WRITE_ATTEMPTS):
            state = self._refresh_state(tp)
            if state is None:  # no replica was ever alive to start it
                error = (
                    Errors.PREFERRED_LEADER_NOT_AVAILABLE
                    if election is ElectionType.PREFERRED
                    else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
                )
                return ElectionOutcome(error, f"{tp[0]}-{tp[1]} has no state yet")
            outcome = admin_election(election, state, replicas, self._live)
            if outcome.target is None:
                return outcome
            leader, leader_epoch, isr = outcome.target
            try:
                self._states[tp] = write_partition_state(
                    self.zk, self._epoch_zk_version, tp[0], tp[1], leader, leader_epoch, isr,
                    self._epoch, state.zk_version,
                )  # fmt: skip
            except BadVersionError:  # the leader wrote the ISR meanwhile: decide again
                continue
            log.info("controller %d: %s-%d leader %d epoch %d (%s election)", self.broker_id,
                     tp[0], tp[1], leader, leader_epoch, election.name.lower())  # fmt: skip
            return outcome
        return ElectionOutcome(Errors.REQUEST_TIMED_OUT, "the partition state kept changing")

    # -- partition reassignment (KIP-455; the procedure in ``reassignment``) ---------------

    def _assignment_of(self, tp: TopicPartitionKey) -> ReplicaAssignment:
        znode = self._topic_znodes[tp[0]]
        return ReplicaAssignment(
            znode.partitions[tp[1]], znode.adding.get(tp[1], ()), znode.removing.get(tp[1], ())
        )

    def _reassign(
        self, tp: TopicPartitionKey, target: Sequence[int] | None
    ) -> tuple[Errors, str | None]:
        if tp[1] not in self._assignments.get(tp[0], {}):
            return Errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist."
        current = self._assignment_of(tp)
        if target is None:
            if not current.is_being_reassigned:
                return Errors.NO_REASSIGNMENT_IN_PROGRESS, None
            new = current.cancelled()
        else:
            try:
                validate_target(target, current, self._live)
            except InvalidReassignmentError as e:
                return Errors.INVALID_REPLICA_ASSIGNMENT, str(e)
            new = current.reassign_to(target)
        log.info("controller %d: reassigning %s-%d: %s -> %s", self.broker_id, tp[0], tp[1],
                 current, new)  # fmt: skip
        if new.is_being_reassigned:
            if new != current:
                self._write_assignment(tp, new)
            self._maybe_complete(tp)
        elif new != current:
            self._finish(tp, new.replicas)
        return Errors.NONE, None

    def _watch_isr(self, tp: TopicPartitionKey) -> None:
        if tp in self._isr_watched:
            return
        self._isr_watched.add(tp)

        def callback(*_args: object) -> bool | None:
            if self._stopped or tp not in self._moving:
                self._isr_watched.discard(tp)
                return False
            self._isr_changed()
            return None

        DataWatch(self.zk, TopicPartitionStateZNode.path(*tp), callback)

    def _maybe_complete(self, tp: TopicPartitionKey) -> None:
        """Finish ``tp``'s reassignment if the ISR holds its whole target."""
        moving = self._moving.get(tp)
        state = self._refresh_state(tp)
        if moving is None or state is None or not set(moving.target) <= set(state.isr):
            return
        self._finish(tp, moving.target)

    def _finish(self, tp: TopicPartitionKey, target: tuple[int, ...]) -> None:
        """Leadership into ``target``, then the assignment = ``target``, then the ISR within it
        (each step idempotent: a new controller redoes what is left)."""
        for _ in range(MAX_WRITE_ATTEMPTS):
            state = self._refresh_state(tp)
            if state is None or state.leader in target:
                break
            leader = reassignment_leader(state, target, self._live)
            if leader is None:  # the reconciliation below takes the partition offline
                break
            isr = tuple(b for b in state.isr if b in self._live)
            try:
                self._states[tp] = write_partition_state(
                    self.zk, self._epoch_zk_version, tp[0], tp[1], leader,
                    state.leader_epoch + 1, isr, self._epoch, state.zk_version,
                )  # fmt: skip
                break
            except BadVersionError:
                continue
        self._write_assignment(tp, ReplicaAssignment(target))
        log.info("controller %d: reassignment of %s-%d done: replicas %s", self.broker_id,
                 tp[0], tp[1], list(target))  # fmt: skip
        self._refresh_state(tp)
        self._reconcile_partition(tp, target)

    def _write_assignment(self, tp: TopicPartitionKey, assignment: ReplicaAssignment) -> None:
        """Record ``assignment`` as ``tp``'s in the topic znode (conditional on its version,
        re-read on conflict) and reload the topic."""
        topic, partition = tp
        for _ in range(MAX_WRITE_ATTEMPTS):
            data, stat = self.zk.get(TopicZNode.path(topic))
            znode = TopicZNode.decode(topic, data)
            adding = {p: r for p, r in znode.adding.items() if p != partition}
            removing = {p: r for p, r in znode.removing.items() if p != partition}
            if assignment.adding:
                adding[partition] = assignment.adding
            if assignment.removing:
                removing[partition] = assignment.removing
            try:
                write_topic_assignment(
                    self.zk, self._epoch_zk_version, topic,
                    {**znode.partitions, partition: assignment.replicas}, znode.topic_id,
                    internal=znode.internal, adding=adding, removing=removing,
                    expected_version=stat.version,
                )  # fmt: skip
            except BadVersionError:  # a CreatePartitions meanwhile: merge again
                continue
            self._load_topic(topic)
            return
        raise ZkDataError(TopicZNode.path(topic), "a stable znode to write", "constant changes")
