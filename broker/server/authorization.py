"""Authorization of requests: the broker's ``AclAuthorizer``, its store, and the checks.

**Which authorizer.** ``authorizer.class.name`` naming Kafka's ACL authorizer
(``kafka.security.authorizer.AclAuthorizer``, the older ``SimpleAclAuthorizer`` or KRaft's
``StandardAuthorizer``) gives the broker an ``AclAuthorizer`` (``super.users``,
``allow.everyone.if.no.acl.found``) over

* ZooKeeper in cluster mode (``ZkAclStore``: Kafka's ``/kafka-acl`` znodes), kept fresh by an
  ``AclChangeWatcher`` on ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes``: a
  change made through any broker reaches every other one within a ZooKeeper round trip;
* ``sluice-acls.json`` in the first log dir standalone (``FileAclStore``).

Unset, there is none: everything is allowed and CreateAcls / DescribeAcls / DeleteAcls answer
SECURITY_DISABLED, as Kafka. Any other class name stops the start (``ConfigError``): a
broker must not serve unprotected what its config says is protected.

**The checks.** Handlers ask :func:`allowed` (one resource), :func:`allowed_any`
(``authorizeByResourceType``) with the principal and client address of the connection they
serve (``CURRENT_PRINCIPAL``, ``CURRENT_PEER``) and answer each refused resource with its own
code (TOPIC_/GROUP_/TRANSACTIONAL_ID_/CLUSTER_AUTHORIZATION_FAILED), as Kafka's
``KafkaApis`` does. APIs that only act on the cluster are checked here, before their handler
runs (:func:`cluster_denied`, called by the broker's dispatch): ``CLUSTER_OPERATIONS`` names
the operation each needs on the cluster resource, and a refusal is the API's own response
with CLUSTER_AUTHORIZATION_FAILED in every error field (Kafka's ``getErrorResponse``).

Brokers call each other too (follower fetches: CLUSTER_ACTION; transaction markers:
CLUSTER_ACTION; Metadata): the principal they authenticate as on the inter-broker listener
must be in ``super.users`` (or be granted those), as in Kafka.

Thread-safety: the checks run on the event loop and read the authorizer's snapshot; the
watcher's callbacks run on kazoo's thread and update the authorizer under its lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kio.schema.create_acls.v1.request import CreateAclsRequest
from kio.schema.delete_acls.v1.request import DeleteAclsRequest
from kio.schema.describe_acls.v1.request import DescribeAclsRequest

from sluice.broker.config import BrokerConfig, ConfigError
from sluice.broker.protocol import ApiKey, Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import CLUSTER_RESOURCE_NAME, AclOperation, ResourceType
from sluice.broker.security.acl_store import FileAclStore, ZkAclStore
from sluice.broker.security.authorizer import (
    AclAuthorizer,
    InMemoryAclStore,
    authorizer_configured,
)
from sluice.broker.security.errors import AclZnodeError, SecurityError
from sluice.broker.server.context import CURRENT_PEER, CURRENT_PRINCIPAL, BrokerContext
from sluice.broker.server.responses import respond

log = logging.getLogger(__name__)

__all__ = [
    "DESCRIBE_ACLS",
    "CREATE_ACLS",
    "DELETE_ACLS",
    "CLUSTER_OPERATIONS",
    "AclChangeWatcher",
    "authorizer_wanted",
    "start_authorizer",
    "allowed",
    "allowed_any",
    "cluster_denied",
]

# The ACL API keys, from Kafka's message definitions (kio), until ApiKey lists them.
DESCRIBE_ACLS: Final = int(DescribeAclsRequest.__api_key__)
CREATE_ACLS: Final = int(CreateAclsRequest.__api_key__)
DELETE_ACLS: Final = int(DeleteAclsRequest.__api_key__)

#: APIs that act on the cluster only, and the operation each needs on the cluster resource
#: (KafkaApis: ``authHelper.authorizeClusterOperation``). DescribeCluster needs none on a
#: broker (only KRaft controllers ask for ALTER), so it is not here.
CLUSTER_OPERATIONS: Final[Mapping[int, AclOperation]] = {
    ApiKey.DESCRIBE_LOG_DIRS: AclOperation.DESCRIBE,
    ApiKey.ALTER_REPLICA_LOG_DIRS: AclOperation.ALTER,
    ApiKey.ELECT_LEADERS: AclOperation.ALTER,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: AclOperation.ALTER,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: AclOperation.DESCRIBE,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: AclOperation.DESCRIBE,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: AclOperation.ALTER,
    ApiKey.WRITE_TXN_MARKERS: AclOperation.CLUSTER_ACTION,
    CREATE_ACLS: AclOperation.ALTER,
    DELETE_ACLS: AclOperation.ALTER,
    DESCRIBE_ACLS: AclOperation.DESCRIBE,
}


# -- building it ---------------------------------------------------------------------------


def authorizer_wanted(config: BrokerConfig) -> bool:
    """Whether the config asks for the ACL authorizer; ``ConfigError`` for another class or a
    bad ``super.users`` / ``allow.everyone.if.no.acl.found`` (checked before anything starts)."""
    try:
        wanted = authorizer_configured(config.security_properties)
        if wanted:
            AclAuthorizer.from_properties(config.security_properties, InMemoryAclStore())
    except SecurityError as exc:
        raise ConfigError(str(exc)) from None
    return wanted


def start_authorizer(
    config: BrokerConfig, zk: KazooClient | None
) -> tuple[AclAuthorizer | None, AclChangeWatcher | None]:
    """The authorizer over its store, loaded (cluster mode: with its change watcher started;
    ZooKeeper must be connected). ``(None, None)`` without ``authorizer.class.name``. Blocks:
    call it off the event loop."""
    if not authorizer_wanted(config):
        return None, None
    properties = config.security_properties
    if zk is None:
        try:
            store = FileAclStore(Path(config.log_dirs[0]))
        except AclZnodeError as exc:  # a damaged ACL file: one line, not a traceback
            raise ConfigError(str(exc)) from None
        return AclAuthorizer.from_properties(properties, store), None
    zk_store = ZkAclStore(zk)
    zk_store.ensure_paths()
    watcher = AclChangeWatcher(zk, zk_store)
    last = {root: zk_store.last_change(root) for root in ZkAclStore.CHANGE_ROOTS}
    authorizer = AclAuthorizer.from_properties(properties, zk_store)  # loads every znode
    watcher.start(authorizer, last)
    return authorizer, watcher


class AclChangeWatcher:
    """Re-reads the patterns named by new change notifications (Kafka's
    ``ZkNodeChangeNotificationListener``); purges notifications older than 15 minutes.

    Notifications are processed in sequence order above the last one seen; the sequence
    numbers present before the first full load are skipped (the load read their changes).
    kazoo re-arms the watches after a reconnect, and the notifications written meanwhile are
    then processed (unless older than the 15 minutes they are kept).
    """

    def __init__(self, zk: KazooClient, store: ZkAclStore) -> None:
        self._zk = zk
        self._store = store
        self._stopped = False
        self._last: dict[str, int] = {}
        self._authorizer: AclAuthorizer | None = None

    def start(self, authorizer: AclAuthorizer, last: Mapping[str, int]) -> None:
        self._authorizer = authorizer
        self._last = dict(last)
        for root in ZkAclStore.CHANGE_ROOTS:
            self._zk.ChildrenWatch(root, self._callback(root))

    def stop(self) -> None:
        self._stopped = True

    def _callback(self, root: str) -> Callable[[list[str]], bool | None]:
        def changed(_children: list[str]) -> bool | None:
            if self._stopped:
                return False  # ends the watch
            self.process(root)
            return None

        return changed

    def process(self, root: str) -> None:
        """Apply the notifications under ``root`` not yet seen (kazoo's thread)."""
        authorizer = self._authorizer
        if authorizer is None:
            return
        try:
            patterns, self._last[root] = self._store.changes_since(root, self._last[root])
            for pattern in patterns:
                authorizer.refresh(pattern)
            self._store.purge_changes(root, int(time.time() * 1000))
        except (KazooException, AclZnodeError) as exc:
            # The next notification (or reconnect) tries again from the same sequence number.
            log.warning("reading the ACL changes under %s failed: %s", root, exc)


# -- the checks ----------------------------------------------------------------------------


def _who() -> tuple[str, str]:
    return CURRENT_PRINCIPAL.get(), CURRENT_PEER.get().lstrip("/")


def allowed(ctx: BrokerContext, operation: AclOperation, resource: ResourceType, name: str) -> bool:
    """Whether the connection's principal may do ``operation`` on the resource (always,
    without an authorizer)."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    principal, host = _who()
    if authorizer.authorize(principal, host, operation, resource, name):
        return True
    log.debug(
        "principal %s from %s denied %s on %s:%s",
        principal, host, operation.name, resource.name, name,
    )  # fmt: skip
    return False


def allowed_any(ctx: BrokerContext, operation: AclOperation, resource: ResourceType) -> bool:
    """Whether the principal may do ``operation`` on some resource of the type."""
    authorizer = ctx.authorizer
    if authorizer is None:
        return True
    principal, host = _who()
    return authorizer.authorize_any(principal, host, operation, resource)


def cluster_allowed(ctx: BrokerContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_RESOURCE_NAME)


def cluster_denied(ctx: BrokerContext, request: Request) -> bytes | None:
    """For an API of ``CLUSTER_OPERATIONS`` the principal may not call: its error response
    (CLUSTER_AUTHORIZATION_FAILED everywhere); else None (the handler runs)."""
    if ctx.authorizer is None:
        return None
    operation = CLUSTER_OPERATIONS.get(request.api_key)
    if operation is None or cluster_allowed(ctx, operation):
        return None
    return respond(request, _error_values(request.api_key, request.body))


_CODE: Final = Errors.CLUSTER_AUTHORIZATION_FAILED
_MESSAGE: Final = "Cluster authorization failed."


def _partitions(indexes: Any, key: str = "partition_index") -> list[dict[str, Any]]:
    return [{key: int(i), "error_code": _CODE, "error_message": _MESSAGE} for i in indexes]


def _error_values(api_key: int, body: Any) -> dict[str, Any]:
    """The API's error response values (``build`` drops what a version lacks)."""
    top = {"throttle_time": 0, "error_code": _CODE, "error_message": _MESSAGE}
    if api_key == ApiKey.ALTER_REPLICA_LOG_DIRS:
        results = [
            {"topic_name": t.name, "partitions": _partitions(t.partitions)}
            for d in body.dirs
            for t in d.topics
        ]
        return {**top, "results": results}
    if api_key == ApiKey.ELECT_LEADERS:
        elections = [
            {"topic": t.topic, "partition_result": _partitions(t.partitions, "partition_id")}
            for t in body.topic_partitions or ()
        ]
        return {**top, "replica_election_results": elections}
    if api_key == ApiKey.ALTER_PARTITION_REASSIGNMENTS:
        responses = [
            {"name": t.name, "partitions": _partitions(p.partition_index for p in t.partitions)}
            for t in body.topics
        ]
        return {**top, "responses": responses}
    if api_key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
        users = [{"user": u.name, "error_code": _CODE, "error_message": _MESSAGE,
                  "credential_infos": []} for u in body.users or ()]  # fmt: skip
        return {**top, "results": users}
    if api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        names = dict.fromkeys(c.name for c in (*body.deletions, *body.upsertions))
        return {**top, "results": [
            {"user": n, "error_code": _CODE, "error_message": _MESSAGE} for n in names
        ]}  # fmt: skip
    if api_key == ApiKey.WRITE_TXN_MARKERS:
        markers = [
            {"producer_id": m.producer_id, "topics": [
                {"name": t.name, "partitions": _partitions(t.partition_indexes)}
                for t in m.topics
            ]}
            for m in body.markers
        ]  # fmt: skip
        return {"markers": markers}
    if api_key == CREATE_ACLS:
        return {**top, "results": [
            {"error_code": _CODE, "error_message": _MESSAGE} for _ in body.creations
        ]}  # fmt: skip
    if api_key == DELETE_ACLS:
        return {**top, "filter_results": [
            {"error_code": _CODE, "error_message": _MESSAGE, "matching_acls": []}
            for _ in body.filters
        ]}  # fmt: skip
    # DescribeLogDirs (v3+ carries the code; before, an empty result as Kafka),
    # ListPartitionReassignments, DescribeAcls: the top-level code, nothing else.
    return {**top, "results": [], "topics": [], "resources": []}
