"""Authorized operations (KIP-430): the bitfield of what a principal may do on one resource.

Metadata (``topic_authorized_operations``, v8+), DescribeCluster
(``cluster_authorized_operations``) and DescribeGroups (``authorized_operations``, v3+) carry,
when the request asks for it, one bit per ACL operation the connection's principal may
perform on the resource: bit ``1 << code`` with Kafka's ``AclOperation`` codes (READ 3 ...
IDEMPOTENT_WRITE 12). Only the operations Kafka's ``AclEntry.supportedOperations`` lists for
the resource type are tried (never ALL, ANY or UNKNOWN), each as the authorizer would judge a
request (implied operations included: READ grants DESCRIBE). Without an authorizer every
supported operation is allowed, as Kafka's ``AuthHelper.authorizedOperations`` answers.
Not asked for, the field is :data:`NOT_REQUESTED` (``Integer.MIN_VALUE``).

Thread-safety: runs on the event loop; reads the authorizer's snapshot like every check.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from sluice.broker.protocol.metadata_response import NOT_REQUESTED
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.context import CURRENT_PEER, CURRENT_PRINCIPAL, BrokerContext

__all__ = ["NOT_REQUESTED", "SUPPORTED_OPERATIONS", "authorized_operations"]

_O = AclOperation

#: Kafka's ``AclEntry.supportedOperations`` per resource type.
SUPPORTED_OPERATIONS: Final[Mapping[ResourceType, tuple[AclOperation, ...]]] = MappingProxyType(
    {
        ResourceType.TOPIC: (_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                             _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
        ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE),
        ResourceType.CLUSTER: (_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS,
                               _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE),
        ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
        ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
        ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
    }
)  # fmt: skip


def authorized_operations(ctx: BrokerContext, resource: ResourceType, name: str) -> int:
    """The bitfield of the supported operations on ``resource`` ``name`` that the connection's
    principal may perform (every supported one without an authorizer)."""
    supported = SUPPORTED_OPERATIONS[resource]
    authorizer = ctx.authorizer
    if authorizer is None:
        granted = supported
    else:
        principal, host = CURRENT_PRINCIPAL.get(), CURRENT_PEER.get().lstrip("/")
        granted = tuple(
            op for op in supported if authorizer.authorize(principal, host, op, resource, name)
        )
    bits = 0
    for op in granted:
        bits |= 1 << int(op)
    return bits
