"""DescribeConfigs (v1–4), AlterConfigs (v0–2), IncrementalAlterConfigs (v0–1).

Resources, as Kafka's ``ConfigResource.Type``: TOPIC (2) and BROKER (4); BROKER_LOGGER (8) and
others are INVALID_REQUEST.

**DescribeConfigs** of a topic lists every topic config Kafka defines
(``sluice.broker.cluster.topic_config``), each with its value and where it comes from — the topic's
override (``TOPIC_CONFIG``), this broker's dynamic config or the cluster's dynamic default
(``DYNAMIC_BROKER_CONFIG``, ``DYNAMIC_DEFAULT_BROKER_CONFIG``), its static setting
(``STATIC_BROKER_CONFIG``), all under the broker key, or Kafka's default (``DEFAULT_CONFIG``) —
and, when asked, the synonyms in precedence order, as Kafka's ``ConfigHelper`` reports them. A
broker resource (its id, or "" for the cluster default) lists the broker's settings as a
ZooKeeper-mode Kafka reports them: a key the properties file named is ``STATIC_BROKER_CONFIG``, any
other ``DEFAULT_CONFIG`` (``advertised.listeners`` unset included, its value then derived from
``listeners``); the synonyms are the static setting, then Kafka's default where it has one; a key
altered at run time is ``DYNAMIC_BROKER_CONFIG`` (this broker's) or
``DYNAMIC_DEFAULT_BROKER_CONFIG`` (the cluster default), those levels first among the synonyms.
``read_only`` is Kafka's update mode: false for the keys Kafka changes at run time
(``DynamicBrokerConfig``: listeners, the log settings, the topic-config synonyms), true for the
rest; of those, AlterConfigs takes the ones this broker applies live and the ones Sluice reads
nowhere (``dynamic_broker_config.ACCEPTED_KEYS``), and refuses the others saying so
(``KAFKA_DYNAMIC_KEYS``).
The cluster default (resource ``""``) lists only the dynamic defaults, as Kafka does. The keys the
file named come from the config's ``named_keys`` where it records them; without it, a key is taken
as named unless its value is Kafka's default (or, for ``advertised.listeners``, the one derived
from ``listeners``).

**AlterConfigs** replaces a topic's overrides with the ones given; **IncrementalAlterConfigs**
applies SET / DELETE / APPEND / SUBTRACT (the last two on list configs only) to them. Both
validate the result as CreateTopics does (every Kafka topic config accepted; values parsed and
checked as Kafka does, then by the log settings), store it through the cluster view (the
standalone store, or ``/config/topics/<t>`` and a change notification in ZooKeeper), and every
broker's replicas apply it to their logs live. ``validate_only`` stops before storing.

On a **BROKER** resource (this broker's id, or ``""`` for every broker's default) both alter
that level's dynamic configs (``sluice.broker.server.dynamic_broker_config``: ZooKeeper's
``/config/brokers/<id>`` / ``<default>`` with a change notification, or a file in the log dir
standalone), applied live by every broker they concern. A key the broker cannot change live,
a bad value or another broker's id is INVALID_REQUEST naming it, as Kafka's ZooKeeper mode
answers (``ZkAdminManager.alterBrokerConfigs``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from sluice.broker.cluster import topic_config as tc
from sluice.broker.cluster.topic_metadata import InvalidConfigError, UnknownTopicError
from sluice.broker.config import BrokerConfig
from sluice.broker.log.log_config import TOPIC_KEYS, LogConfig
from sluice.broker.protocol import Request
from sluice.broker.protocol.errors import Errors
from sluice.broker.security.acl import AclOperation, ResourceType
from sluice.broker.server.authorization import allowed, cluster_allowed
from sluice.broker.server.context import BrokerContext
from sluice.broker.server.dynamic_broker_config import (
    ACCEPTED_KEYS,
    DEFAULT_ENTITY,
    KAFKA_DYNAMIC_KEYS,
    DynamicConfigError,
    entity_of,
)
from sluice.broker.server.error_mapping import ADMIN_ERRORS, code_for
from sluice.broker.server.responses import respond
from sluice.broker.server.topic_config_check import check_topic_config

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# -- broker settings as Kafka names them --------------------------------------------------------


def _log_setting_text(log: LogConfig, topic_key: str) -> str:
    value = getattr(log, TOPIC_KEYS[topic_key])
    return tc.config_text(value)


def broker_values(config: BrokerConfig) -> dict[str, str]:
    """Broker keys (topic-config synonyms) whose value on this broker differs from Kafka's
    default for the topic config, with that value."""
    out: dict[str, str] = {}
    for key, definition in tc.TOPIC_CONFIGS.items():
        if not definition.synonyms:
            continue
        if key in TOPIC_KEYS:
            value = _log_setting_text(config.log, key)
        elif key == "min.insync.replicas":
            value = str(config.min_insync_replicas)
        elif key == "unclean.leader.election.enable":
            value = tc.config_text(config.unclean_leader_election)
        else:
            continue
        if value != definition.default:
            out[definition.synonyms[0]] = value
    return out


def _broker_settings(config: BrokerConfig) -> dict[str, tuple[str | None, str | None]]:
    """Broker key → (value, Kafka's default), for the keys Sluice reads."""
    defaults = BrokerConfig()
    settings: dict[str, tuple[str | None, str | None]] = {}
    for key, attr in (
        ("broker.id", "broker_id"),
        ("num.partitions", "num_partitions"),
        ("default.replication.factor", "default_replication_factor"),
        ("auto.create.topics.enable", "auto_create_topics"),
        ("socket.request.max.bytes", "socket_request_max_bytes"),
        ("zookeeper.connect", "zookeeper_connect"),
        ("zookeeper.session.timeout.ms", "zookeeper_session_timeout_ms"),
        ("zookeeper.connection.timeout.ms", "zookeeper_connection_timeout_ms"),
        ("offsets.commit.timeout.ms", "offsets_commit_timeout_ms"),
        ("min.insync.replicas", "min_insync_replicas"),
        ("replica.lag.time.max.ms", "replica_lag_time_max_ms"),
        ("unclean.leader.election.enable", "unclean_leader_election"),
        ("offsets.topic.num.partitions", "offsets_topic_num_partitions"),
        ("group.initial.rebalance.delay.ms", "group_initial_rebalance_delay_ms"),
        ("group.min.session.timeout.ms", "group_min_session_timeout_ms"),
        ("group.max.session.timeout.ms", "group_max_session_timeout_ms"),
        ("log.flush.scheduler.interval.ms", "flush_scheduler_interval_ms"),
        ("log.retention.check.interval.ms", "retention_check_interval_ms"),
        ("log.flush.offset.checkpoint.interval.ms", "checkpoint_interval_ms"),
    ):
        value, default = getattr(config, attr), getattr(defaults, attr)
        settings[key] = (
            None if value is None else tc.config_text(value),
            None if default is None else tc.config_text(default),
        )
    listener, advertised = config.listener, config.advertised
    settings["listeners"] = (f"{listener.name}://{listener.host}:{listener.port}", None)
    settings["advertised.listeners"] = (
        f"{advertised.name}://{advertised.host}:{advertised.port}",
        None,
    )
    settings["log.dirs"] = (",".join(config.log_dirs), None)
    # Read by the ACL authorizer (sluice.broker.server.authorization); Kafka's default is "".
    settings["authorizer.class.name"] = (
        config.security_properties.get("authorizer.class.name", ""),
        "",
    )
    for key, definition in tc.TOPIC_CONFIGS.items():
        if key in TOPIC_KEYS and definition.synonyms:
            settings[definition.synonyms[0]] = (
                _log_setting_text(config.log, key),
                definition.default,
            )
    return settings


def named_keys(config: BrokerConfig) -> frozenset[str] | None:
    """The keys the broker's properties file named, if the config records them (the accessor
    for ``BrokerConfig.named_keys``; None while it does not exist)."""
    keys = getattr(config, "named_keys", None)
    return frozenset(keys) if keys is not None else None


def _static(key: str, value: str | None, default: str | None, config: BrokerConfig) -> bool:
    named = named_keys(config)
    if named is not None:
        return key in named
    if key == "advertised.listeners":  # unset: derived from the inter-broker listener
        derived = (config.listener.name, config.listener.port)
        return (config.advertised.name, config.advertised.port) != derived
    return value != default


def _broker_entries(
    config: BrokerConfig, broker: Mapping[str, str], default: Mapping[str, str]
) -> list[tc.ConfigEntry]:
    """This broker's settings: ``config`` is its static config, ``broker`` and ``default`` its
    dynamic configs and the cluster's dynamic defaults."""
    entries = []
    settings = _broker_settings(config)
    for key in sorted(settings.keys() | broker.keys() | default.keys()):
        value, kafka_default = settings.get(key, (None, None))
        static = _static(key, value, kafka_default, config)
        synonyms: list[tuple[str, str | None, tc.ConfigSource]] = []
        if key in broker:
            synonyms.append((key, broker[key], tc.ConfigSource.DYNAMIC_BROKER_CONFIG))
        if key in default:
            synonyms.append((key, default[key], tc.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if static:
            synonyms.append((key, value, tc.ConfigSource.STATIC_BROKER_CONFIG))
        if kafka_default is not None:
            synonyms.append((key, kafka_default, tc.ConfigSource.DEFAULT_CONFIG))
        if synonyms:
            _, value, source = synonyms[0]
        else:
            source = tc.ConfigSource.DEFAULT_CONFIG
        entries.append(
            tc.ConfigEntry(
                key,
                value,
                source,
                _type_of(value),
                read_only=key not in ACCEPTED_KEYS and key not in KAFKA_DYNAMIC_KEYS,
                synonyms=tuple(synonyms),
            )  # fmt: skip
        )
    return entries


def _default_entries(default: Mapping[str, str]) -> list[tc.ConfigEntry]:
    """The cluster's dynamic defaults (resource ``""``), as Kafka lists them."""
    source = tc.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    return [
        tc.ConfigEntry(key, value, source, _type_of(value), synonyms=((key, value, source),))
        for key, value in sorted(default.items())
    ]


def _with_dynamic_levels(
    entries: list[tc.ConfigEntry], broker: Mapping[str, str], default: Mapping[str, str]
) -> list[tc.ConfigEntry]:
    """A topic's entries (``tc.describe`` over the static broker values) with this broker's
    dynamic configs (``broker``) and the cluster's dynamic defaults (``default``) among the
    synonyms, after the topic's own override and before the static setting, as Kafka's
    ``ConfigHelper`` orders them; an entry the topic does not override takes the first."""
    out = []
    for entry in entries:
        definition = tc.TOPIC_CONFIGS.get(entry.name)
        dynamic: list[tuple[str, str | None, tc.ConfigSource]] = []
        for synonym in definition.synonyms if definition else ():
            if synonym in broker:
                dynamic.append((synonym, broker[synonym], tc.ConfigSource.DYNAMIC_BROKER_CONFIG))
            if synonym in default:
                dynamic.append(
                    (synonym, default[synonym], tc.ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
                )
        if not dynamic:
            out.append(entry)
            continue
        synonyms = list(entry.synonyms)
        at = 1 if synonyms and synonyms[0][2] is tc.ConfigSource.TOPIC_CONFIG else 0
        synonyms[at:at] = dynamic
        _, value, source = synonyms[0]
        out.append(dataclasses.replace(entry, value=value, source=source, synonyms=tuple(synonyms)))
    return out


def _type_of(value: str | None) -> tc.ConfigType:
    if value in ("true", "false"):
        return tc.ConfigType.BOOLEAN
    if value is not None and value.lstrip("-").isdigit():
        return tc.ConfigType.LONG
    return tc.ConfigType.STRING


# -- DescribeConfigs ----------------------------------------------------------------------------


def _entry_values(entry: tc.ConfigEntry, synonyms: bool) -> dict[str, Any]:
    return {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": int(entry.source),
        "is_sensitive": entry.sensitive,
        "synonyms": [{"name": n, "value": v, "source": int(s)} for n, v, s in entry.synonyms]
        if synonyms
        else [],
        "config_type": int(entry.type),
        "documentation": None,
    }


def _refusal(ctx: BrokerContext, resource: Any, operation: AclOperation) -> dict[str, Any] | None:
    """KafkaApis: a topic needs ``operation`` on the topic, a broker (or broker logger) on the
    cluster; refused, the resource's answer (other types are left to the handler)."""
    if resource.resource_type == TOPIC:
        if allowed(ctx, operation, ResourceType.TOPIC, resource.resource_name):
            return None
        code = Errors.TOPIC_AUTHORIZATION_FAILED
    elif resource.resource_type in (BROKER, BROKER_LOGGER):
        if cluster_allowed(ctx, operation):
            return None
        code = Errors.CLUSTER_AUTHORIZATION_FAILED
    else:
        return None
    return {
        "error_code": code, "error_message": "Authorization failed.",
        "resource_type": resource.resource_type, "resource_name": resource.resource_name,
    }  # fmt: skip


async def handle_describe_configs(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    results = []
    for resource in body.resources:
        result: dict[str, Any] = {
            "error_code": Errors.NONE, "error_message": None,
            "resource_type": resource.resource_type, "resource_name": resource.resource_name,
            "configs": [],
        }  # fmt: skip
        results.append(result)
        refusal = _refusal(ctx, resource, AclOperation.DESCRIBE_CONFIGS)
        if refusal is not None:
            result.update(refusal)
            continue
        entries: list[tc.ConfigEntry]
        if resource.resource_type == TOPIC:
            info = ctx.cluster.get(resource.resource_name)
            if info is None:
                result["error_code"] = Errors.UNKNOWN_TOPIC_OR_PARTITION
                result["error_message"] = f"Topic {resource.resource_name} does not exist"
                continue
            dynamic = ctx.dynamic_config
            entries = _with_dynamic_levels(
                tc.describe(info.config, broker_values(dynamic.static)),
                dynamic.overrides(dynamic.entity),
                dynamic.overrides(DEFAULT_ENTITY),
            )
        elif resource.resource_type == BROKER:
            name = resource.resource_name
            if name and name != str(ctx.config.broker_id):
                result["error_code"] = Errors.INVALID_REQUEST
                result["error_message"] = (
                    f"Unexpected broker id, expected {ctx.config.broker_id} or empty string, "
                    f"but received {name}"
                )
                continue
            dynamic = ctx.dynamic_config
            default = dynamic.overrides(DEFAULT_ENTITY)
            entries = (
                _broker_entries(dynamic.static, dynamic.overrides(name), default)
                if name
                else _default_entries(default)
            )
        else:
            result["error_code"] = Errors.INVALID_REQUEST
            result["error_message"] = f"Unsupported resource type {resource.resource_type}"
            continue
        wanted = resource.configuration_keys
        if wanted is not None:
            entries = [e for e in entries if e.name in set(wanted)]
        result["configs"] = [_entry_values(e, synonyms) for e in entries]
    return respond(request, {"throttle_time": 0, "results": results})


# -- AlterConfigs and IncrementalAlterConfigs -----------------------------------------------------


async def _apply(
    ctx: BrokerContext, resource: Any, change: Any, validate_only: bool
) -> dict[str, Any]:
    """Answer one resource: ``change(current overrides) -> new overrides``."""
    out: dict[str, Any] = {
        "error_code": Errors.NONE, "error_message": None,
        "resource_type": resource.resource_type, "resource_name": resource.resource_name,
    }  # fmt: skip
    if resource.resource_type == BROKER:
        return await _apply_broker(ctx, resource, change, validate_only, out)
    if resource.resource_type != TOPIC:
        out["error_code"] = Errors.INVALID_REQUEST
        out["error_message"] = f"Unsupported resource type {resource.resource_type}"
        return out
    name = resource.resource_name
    try:
        info = ctx.cluster.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic {name} does not exist")
        new = check_topic_config(ctx, change(dict(info.config)))
        if not validate_only:
            await ctx.off_loop(ctx.cluster.alter_topic_config, name, new)
    except ADMIN_ERRORS as exc:
        out["error_code"] = code_for(exc)
        out["error_message"] = str(exc)
    return out


async def _apply_broker(
    ctx: BrokerContext, resource: Any, change: Any, validate_only: bool, out: dict[str, Any]
) -> dict[str, Any]:
    """Answer one BROKER resource: ``change(current dynamic configs) -> new ones``."""
    name = resource.resource_name
    if name and name != str(ctx.config.broker_id):
        out["error_code"] = Errors.INVALID_REQUEST
        out["error_message"] = (
            f"Unexpected broker id, expected {ctx.config.broker_id}, but received {name}"
        )
        return out
    entity = entity_of(name)
    try:
        new = {
            k: v for k, v in change(ctx.dynamic_config.overrides(entity)).items() if v is not None
        }
        await ctx.off_loop(ctx.dynamic_config.alter, entity, new, validate_only=validate_only)
    except (DynamicConfigError, InvalidConfigError) as exc:
        out["error_code"] = Errors.INVALID_REQUEST
        out["error_message"] = f"Invalid config value for resource {_describe(resource)}: {exc}"
    except ADMIN_ERRORS as exc:
        out["error_code"] = code_for(exc)
        out["error_message"] = str(exc)
    return out


def _describe(resource: Any) -> str:
    return f"ConfigResource(type=BROKER, name='{resource.resource_name}')"


def _duplicates(names: list[str]) -> list[str]:
    return sorted({n for n in names if names.count(n) > 1})


async def handle_alter_configs(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    responses = []
    for resource in body.resources:
        refusal = _refusal(ctx, resource, AclOperation.ALTER_CONFIGS)
        if refusal is not None:
            responses.append(refusal)
            continue
        dupes = _duplicates([c.name for c in resource.configs])
        given = {c.name: c.value for c in resource.configs}

        def replace(_current: dict[str, str], given: dict[str, Any] = given) -> dict[str, Any]:
            return given

        if dupes:
            responses.append(_invalid(resource, f"Error due to duplicate config keys {dupes}"))
            continue
        responses.append(await _apply(ctx, resource, replace, body.validate_only))
    return respond(request, {"throttle_time": 0, "responses": responses})


def _invalid(resource: Any, message: str) -> dict[str, Any]:
    return {
        "error_code": Errors.INVALID_CONFIG, "error_message": message,
        "resource_type": resource.resource_type, "resource_name": resource.resource_name,
    }  # fmt: skip


def _topic_list_default(name: str) -> str | None:
    """A topic key's default if it is a list config (APPEND / SUBTRACT apply), else None;
    ``InvalidConfigError`` for a key that is no topic config."""
    definition = tc.TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfigError(f"Unknown topic config name: {name}")
    return definition.default if definition.type is tc.ConfigType.LIST else None


def _broker_list_default(static: BrokerConfig) -> Callable[[str], str | None]:
    """As :func:`_topic_list_default` for broker keys: the static value of a list key (the
    one dynamic list key is ``log.cleanup.policy``); unknown keys are the alter's to refuse."""
    settings = _broker_settings(static)

    def list_default(name: str) -> str | None:
        topic_key = next((k for k, d in tc.TOPIC_CONFIGS.items() if name in d.synonyms), None)
        definition = tc.TOPIC_CONFIGS.get(topic_key) if topic_key else None
        if definition is None or definition.type is not tc.ConfigType.LIST:
            return None
        return settings.get(name, (definition.default, None))[0] or ""

    return list_default


def _incremental(ops: list[Any], list_default: Callable[[str], str | None]) -> Any:
    def change(current: dict[str, str]) -> dict[str, str]:
        new = dict(current)
        for op in ops:
            default = list_default(op.name)
            if op.config_operation == SET:
                if op.value is None:
                    raise InvalidConfigError(f"Null value not supported for : {op.name}")
                new[op.name] = op.value
            elif op.config_operation == DELETE:
                new.pop(op.name, None)
            elif op.config_operation in (APPEND, SUBTRACT):
                if default is None:
                    verb = "append" if op.config_operation == APPEND else "subtract"
                    raise InvalidConfigError(
                        f"Config value {verb} is not allowed for config key: {op.name}"
                    )
                old = new.get(op.name, default)
                items = [v for v in old.split(",") if v.strip()]
                values = [v.strip() for v in (op.value or "").split(",") if v.strip()]
                if op.config_operation == APPEND:
                    items += [v for v in values if v not in items]
                else:
                    items = [v for v in items if v not in values]
                new[op.name] = ",".join(items)
            else:
                raise InvalidConfigError(f"Unknown config operation {op.config_operation}")
        return new

    return change


async def handle_incremental_alter_configs(ctx: BrokerContext, request: Request) -> bytes:
    body = request.body
    responses = []
    for resource in body.resources:
        refusal = _refusal(ctx, resource, AclOperation.ALTER_CONFIGS)
        if refusal is not None:
            responses.append(refusal)
            continue
        dupes = _duplicates([c.name for c in resource.configs])
        if dupes:
            responses.append(_invalid(resource, f"Error due to duplicate config keys {dupes}"))
            continue
        list_default = (
            _broker_list_default(ctx.dynamic_config.static)
            if resource.resource_type == BROKER
            else _topic_list_default
        )
        change = _incremental(list(resource.configs), list_default)
        responses.append(await _apply(ctx, resource, change, body.validate_only))
    return respond(request, {"throttle_time": 0, "responses": responses})


__all__ = [
    "broker_values",
    "handle_alter_configs",
    "handle_describe_configs",
    "handle_incremental_alter_configs",
]
