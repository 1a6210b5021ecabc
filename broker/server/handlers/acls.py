"""CreateAcls, DescribeAcls, DeleteAcls (v1–3; kio has no v0): the broker's ACLs.

The caller needs ALTER (create, delete) or DESCRIBE (describe) on the cluster, checked before
these run (``sluice.broker.server.authorization.CLUSTER_OPERATIONS``). Without an authorizer
(``authorizer.class.name`` unset) every request is answered SECURITY_DISABLED, as Kafka's
``AclApis``.

* CreateAcls: one result per creation, in order. A binding Kafka would refuse (UNKNOWN / ANY /
  MATCH codes, a cluster not named ``kafka-cluster``, an empty name, a principal without
  ``type:``) is INVALID_REQUEST with the reason; the valid ones are stored, grouped by
  resource pattern, each pattern with one conditional write (``AclAuthorizer.create_acls``).
* DescribeAcls: the bindings the filter matches, grouped by resource pattern. A filter with
  an UNKNOWN code is INVALID_REQUEST.
* DeleteAcls: per filter, the bindings it removed (each with error code NONE).

The writes block on ZooKeeper in cluster mode: they run through ``ctx.off_loop``. A write that
keeps losing to other brokers (``AclUpdateConflictError``) is UNKNOWN_SERVER_ERROR for the
bindings it concerned, with the reason.
"""

from __future__ import annotations

from typing import Any, Final

from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from sluice.broker.security.errors import AclBindingError, AclUpdateConflictError
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.responses import respond

__all__ = ["handle_create_acls", "handle_describe_acls", "handle_delete_acls"]

_DISABLED: Final = "No Authorizer is configured on the broker"


def _code(cls: Any, value: int) -> Any:
    """The enum member for a wire code; UNKNOWN (0) for a code this Kafka does not know."""
    try:
        return cls(int(value))
    except ValueError:
        return cls(0)


def _binding(creation: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _code(ResourceType, creation.resource_type),
            creation.resource_name,
            _code(PatternType, getattr(creation, "resource_pattern_type", PatternType.LITERAL)),
        ),
        AccessControlEntry(
            creation.principal,
            creation.host,
            _code(AclOperation, creation.operation),
            _code(AclPermissionType, creation.permission_type),
        ),
    )


def _filter(body: Any) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            _code(ResourceType, body.resource_type_filter),
            body.resource_name_filter,
            _code(PatternType, getattr(body, "pattern_type_filter", PatternType.LITERAL)),
        ),
        AccessControlEntryFilter(
            body.principal_filter,
            body.host_filter,
            _code(AclOperation, body.operation),
            _code(AclPermissionType, body.permission_type),
        ),
    )


def _pattern_values(pattern: ResourcePattern) -> dict[str, Any]:
    return {
        "resource_type": int(pattern.resource_type),
        "resource_name": pattern.name,
        "pattern_type": int(pattern.pattern_type),
    }


def _entry_values(entry: AccessControlEntry) -> dict[str, Any]:
    return {
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission),
    }


async def handle_create_acls(ctx: BrokerContext, request: Request) -> bytes:
    creations = request.body.creations
    authorizer = ctx.authorizer
    if authorizer is None:
        results = [{"error_code": Errors.SECURITY_DISABLED, "error_message": _DISABLED}] * len(
            creations
        )
        return respond(request, {"throttle_time": 0, "results": results})
    bindings = [_binding(c) for c in creations]
    try:
        outcomes = await ctx.off_loop(authorizer.create_acls, bindings)
    except AclUpdateConflictError as exc:
        failed = {"error_code": Errors.UNKNOWN_SERVER_ERROR, "error_message": str(exc)}
        return respond(request, {"throttle_time": 0, "results": [failed] * len(bindings)})
    results = [
        {"error_code": Errors.NONE, "error_message": None}
        if error is None
        else {"error_code": Errors.INVALID_REQUEST, "error_message": str(error)}
        for error in outcomes
    ]
    return respond(request, {"throttle_time": 0, "results": results})


async def handle_describe_acls(ctx: BrokerContext, request: Request) -> bytes:
    authorizer = ctx.authorizer
    top: dict[str, Any] = {"throttle_time": 0, "error_code": Errors.NONE, "error_message": None}
    if authorizer is None:
        return respond(
            request,
            {**top, "error_code": Errors.SECURITY_DISABLED, "error_message": _DISABLED,
             "resources": []},
        )  # fmt: skip
    binding_filter = _filter(request.body)
    try:
        binding_filter.validate()
    except AclBindingError as exc:
        return respond(
            request,
            {**top, "error_code": Errors.INVALID_REQUEST, "error_message": str(exc),
             "resources": []},
        )  # fmt: skip
    by_pattern: dict[ResourcePattern, list[dict[str, Any]]] = {}
    for binding in authorizer.acls(binding_filter):
        by_pattern.setdefault(binding.pattern, []).append(_entry_values(binding.entry))
    resources = [{**_pattern_values(p), "acls": acls} for p, acls in by_pattern.items()]
    return respond(request, {**top, "resources": resources})


async def handle_delete_acls(ctx: BrokerContext, request: Request) -> bytes:
    filters = request.body.filters
    authorizer = ctx.authorizer
    if authorizer is None:
        disabled = {"error_code": Errors.SECURITY_DISABLED, "error_message": _DISABLED,
                    "matching_acls": []}  # fmt: skip
        return respond(request, {"throttle_time": 0, "filter_results": [disabled] * len(filters)})
    parsed = [_filter(f) for f in filters]
    valid: list[int] = []
    results: list[dict[str, Any]] = []
    for i, binding_filter in enumerate(parsed):
        try:
            binding_filter.validate()
        except AclBindingError as exc:
            results.append({"error_code": Errors.INVALID_REQUEST, "error_message": str(exc),
                            "matching_acls": []})  # fmt: skip
            continue
        valid.append(i)
        results.append({"error_code": Errors.NONE, "error_message": None, "matching_acls": []})
    try:
        deleted = await ctx.off_loop(authorizer.delete_acls, [parsed[i] for i in valid])
    except AclUpdateConflictError as exc:
        for i in valid:
            results[i].update(error_code=Errors.UNKNOWN_SERVER_ERROR, error_message=str(exc))
    else:
        for i, removed in zip(valid, deleted, strict=True):
            results[i]["matching_acls"] = [
                {"error_code": Errors.NONE, "error_message": None,
                 **_pattern_values(b.pattern), **_entry_values(b.entry)}
                for b in removed
            ]  # fmt: skip
    return respond(request, {"throttle_time": 0, "filter_results": results})
