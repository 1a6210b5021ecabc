"""``DynamicBrokerConfig``: the broker configs changed at run time, as Kafka's
``DynamicBrokerConfig`` keeps them.

Two levels, each a ``{key: value}`` map of overrides of the properties file:

* one broker's (AlterConfigs on ``BROKER`` resource ``"<id>"``): ``DYNAMIC_BROKER_CONFIG``;
* the cluster-wide default of every broker (resource ``""``): ``DYNAMIC_DEFAULT_BROKER_CONFIG``.

Precedence, highest first: the broker's, the cluster default, the properties file
(``STATIC_BROKER_CONFIG``), Kafka's default (``DEFAULT_CONFIG``). :meth:`effective` is the
static ``BrokerConfig`` with both levels applied; the broker swaps it in (``apply``), so every
log takes its new settings live and the next topic or partition is created with them.

Where they are kept:

* cluster mode: ZooKeeper, as Kafka 2.x keeps them — ``/config/brokers/<id>`` and
  ``/config/brokers/<default>`` (``{"version":1,"config":{...}}``), each change followed by
  ``/config/changes/config_change_<seq>`` naming ``brokers/<entity>``. Every broker watches
  the notifications (as ``ZkConfigChangeNotificationListener``) and re-reads its own entity and
  the default, so an alter answered by one broker reaches the others;
* standalone: ``<first log dir>/sluice-broker-configs.json``, rewritten atomically::

      {"version": 1, "brokers": {"0": {"log.retention.ms": "60000"}, "<default>": {...}}}

  (Sluice's; the standalone metadata store, ``LocalMetadataStore``, has no place for them).

Which keys may change (``DYNAMIC_KEYS``): those Sluice applies without a restart — the broker
synonyms of the topic configs its logs model (``log.retention.ms``, ``log.segment.bytes``,
``message.max.bytes``, ``log.cleanup.policy`` ...: Kafka's ``DynamicLogConfig``, first synonym
only, so ``log.retention.ms`` but not ``log.retention.hours``) and ``min.insync.replicas``, all
cluster-wide in Kafka (settable per broker or as the default). Kafka's dynamic keys that Sluice
reads nowhere (``UNUSED_KEYS``: ``background.threads``, ``num.io.threads``, the
``sasl.kerberos.*`` ones, per broker only ...) are stored and described without effect, as they
would be in the properties file. Kafka's other dynamic keys
(``listeners`` and the per-listener SSL keys, per broker only; ``num.io.threads``,
``log.cleaner.threads`` ...) are refused as keys Sluice cannot change live, every other Kafka
key as read-only; the refusal is :class:`DynamicConfigError` naming the keys, which the
handler answers INVALID_REQUEST (Kafka's ZooKeeper-mode answer to a ``ConfigException``).

Thread-safety: the two maps are read and swapped under one lock; :meth:`alter` blocks on the
store (handlers call it through ``ctx.off_loop``); the ZooKeeper watch runs on kazoo's thread.
``apply`` is called with the lock held, so two changes apply in the order they were stored;
it must only swap references (attribute assignments), never block.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from sluice.broker.cluster import topic_config as tc
from sluice.broker.cluster.zk_data import (
    BrokerConfigZNode,
    ConfigChangeNotificationZNode,
    ConfigChangesZNode,
    ZkDataError,
)
from sluice.broker.config import BrokerConfig, ConfigError
from sluice.broker.log.log_config import TOPIC_KEYS
from sluice.common.atomic_file import write_atomically

log = logging.getLogger(__name__)

DEFAULT_ENTITY = BrokerConfigZNode.DEFAULT
CONFIG_FILE = "sluice-broker-configs.json"

#: Broker key → topic key: the log settings a broker applies live (``DynamicLogConfig``).
LOG_KEYS: Mapping[str, str] = {
    definition.synonyms[0]: key
    for key, definition in tc.TOPIC_CONFIGS.items()
    if key in TOPIC_KEYS and definition.synonyms
}
#: Every key Sluice changes without a restart (see the module docstring).
DYNAMIC_KEYS = frozenset(LOG_KEYS) | {"min.insync.replicas"}
#: Keys Kafka changes at run time that Sluice reads nowhere, in the properties file or here (its
#: thread pools, Kerberos, connection-creation quotas ...): accepted, stored and described like
#: the others, and without effect, as in the properties file. (librdkafka's admin test 0081 sets
#: background.threads and sasl.kerberos.min.time.before.relogin on a broker.)
UNUSED_KEYS = frozenset({
    "background.threads", "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "max.connection.creation.rate", "metric.reporters",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "compression.type",
    "log.message.downconversion.enable", "log.preallocate",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "sasl.kerberos.service.name",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
})  # fmt: skip
#: Keys Kafka takes for one broker only, never as the cluster default (its listener settings).
PER_BROKER_KEYS = frozenset(k for k in UNUSED_KEYS if k.startswith("sasl.kerberos."))
#: Every key an alter may name.
ACCEPTED_KEYS = DYNAMIC_KEYS | UNUSED_KEYS
#: Keys Kafka changes at run time but Sluice does not (yet): refused with that said, not as
#: read-only. ``listeners``-style keys are per broker only in Kafka; every broker synonym of a
#: topic config is dynamic in Kafka (``DynamicLogConfig``).
KAFKA_DYNAMIC_KEYS = (
    frozenset({
        "listeners", "advertised.listeners", "listener.security.protocol.map", "num.io.threads",
        "num.network.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
        "background.threads", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms", "max.connections",
        "max.connections.per.ip", "max.connections.per.ip.overrides",
        "max.connection.creation.rate",
        "log.retention.minutes", "log.retention.hours", "log.roll.hours", "log.roll.jitter.ms",
        "log.roll.jitter.hours", "log.preallocate", "log.message.downconversion.enable",
        "log.message.timestamp.difference.max.ms", "unclean.leader.election.enable",
        "compression.type", "metric.reporters", "ssl.keystore.location", "ssl.truststore.location",
    })
    | frozenset(s for d in tc.TOPIC_CONFIGS.values() for s in d.synonyms)
) - ACCEPTED_KEYS  # fmt: skip


class DynamicConfigError(ValueError):
    """An alter the broker refuses: a key it cannot change live, or a bad value. Answered
    INVALID_REQUEST with the message."""


class DynamicConfigStore(Protocol):
    """Where the two levels are kept: ``read(entity)`` / ``write(entity, config)`` with entity
    a broker id or :data:`DEFAULT_ENTITY`. Both may block."""

    def read(self, entity: str) -> dict[str, str]: ...

    def write(self, entity: str, config: Mapping[str, str]) -> None: ...


class FileConfigStore:
    """Standalone: ``<log dir>/sluice-broker-configs.json`` (layout in the module docstring).
    Thread-safe: one lock around each read-modify-write."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / CONFIG_FILE
        self._lock = threading.Lock()

    def _load(self) -> dict[str, dict[str, str]]:
        if not self.path.exists():
            return {}
        # A damaged file stops the broker with one line (a ConfigError: exit 2) that says how
        # to recover, rather than a traceback: it holds only what AlterConfigs set.
        recover = "fix it, or remove it to drop the dynamic broker configs set through AlterConfigs"
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{self.path}: expected JSON, found {exc}; {recover}") from None
        brokers = doc.get("brokers") if isinstance(doc, dict) else None
        if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(brokers, dict):
            raise ConfigError(
                f"{self.path}: expected {{'version': 1, 'brokers': {{...}}}}, found "
                f"{str(doc)[:200]}; {recover}"
            )
        return {str(k): {str(a): str(b) for a, b in v.items()} for k, v in brokers.items()}

    def read(self, entity: str) -> dict[str, str]:
        with self._lock:
            return dict(self._load().get(entity, {}))

    def write(self, entity: str, config: Mapping[str, str]) -> None:
        with self._lock:
            brokers = self._load()
            brokers[entity] = dict(config)
            if not config:
                del brokers[entity]
            text = json.dumps({"version": 1, "brokers": brokers}, indent=2, sort_keys=True)
            write_atomically(self.path, text + "\n")


class ZkConfigStore:
    """Cluster mode: the znodes of ``zk_data.BrokerConfigZNode`` and a change notification
    after each write (Kafka's ``AdminZkClient.changeBrokerConfig``). Thread-safe (kazoo's)."""

    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk

    def read(self, entity: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(BrokerConfigZNode.path(entity))
        except NoNodeError:
            return {}
        return BrokerConfigZNode.decode(entity, data)

    def write(self, entity: str, config: Mapping[str, str]) -> None:
        path, data = BrokerConfigZNode.path(entity), BrokerConfigZNode.encode(config)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self.zk.create(path, data, makepath=True)
        self.zk.create(
            ConfigChangeNotificationZNode.path_prefix(),
            ConfigChangeNotificationZNode.encode_broker(entity),
            sequence=True,
            makepath=True,
        )


class DynamicBrokerConfig:
    """This broker's two levels of dynamic configs over its static config. See the module
    docstring."""

    def __init__(
        self,
        static: BrokerConfig,
        store: DynamicConfigStore,
        apply: Callable[[BrokerConfig], None],
    ) -> None:
        self.static = static
        self.entity = str(static.broker_id)
        self._store = store
        self._apply = apply
        self._lock = threading.RLock()
        self._broker: dict[str, str] = {}
        self._default: dict[str, str] = {}
        self._stopped = False
        self._seen_change: int | None = None

    # -- reading -------------------------------------------------------------------------

    def overrides(self, entity: str) -> dict[str, str]:
        """The dynamic configs of ``entity`` (this broker's id or :data:`DEFAULT_ENTITY`)."""
        with self._lock:
            return dict(self._default if entity == DEFAULT_ENTITY else self._broker)

    def effective(self) -> BrokerConfig:
        """The static config with the cluster default, then this broker's, applied."""
        with self._lock:
            return self._effective(self._broker, self._default)

    def _effective(self, broker: Mapping[str, str], default: Mapping[str, str]) -> BrokerConfig:
        """Raises :class:`DynamicConfigError` naming the broker key of a bad value, as Kafka's
        ``ConfigException`` words it."""
        merged = {**default, **broker}
        for key, raw in merged.items():
            try:
                if key in LOG_KEYS:
                    self.static.log.with_overrides({LOG_KEYS[key]: raw})
                elif key == "min.insync.replicas" and (not raw.strip().isdigit() or int(raw) < 1):
                    raise ValueError("expected an integer >= 1")
            except ValueError as exc:
                raise DynamicConfigError(
                    f"Invalid value {raw} for configuration {key}: {exc}"
                ) from None
        topic_keys = {LOG_KEYS[k]: v for k, v in merged.items() if k in LOG_KEYS}
        try:
            log_config = self.static.log.with_overrides(topic_keys)  # the keys together
        except ValueError as exc:
            raise DynamicConfigError(f"Invalid configs {dict(merged)}: {exc}") from None
        min_isr = int(merged.get("min.insync.replicas", self.static.min_insync_replicas))
        return dataclasses.replace(self.static, log=log_config, min_insync_replicas=min_isr)

    # -- changing ------------------------------------------------------------------------

    def check(self, entity: str, config: Mapping[str, str]) -> None:
        """Raise :class:`DynamicConfigError` unless ``config`` may be ``entity``'s dynamic
        configs: every key changeable live, every value valid in the resulting config."""
        refused = sorted(k for k in config if k not in ACCEPTED_KEYS)
        if refused:
            kafka_dynamic = [k for k in refused if k in KAFKA_DYNAMIC_KEYS]
            if kafka_dynamic:
                raise DynamicConfigError(
                    f"Cannot update these configs dynamically in Sluice (Kafka can; set them in "
                    f"the properties and restart): {kafka_dynamic}"
                    + (f"; read-only: {[k for k in refused if k not in kafka_dynamic]}"
                       if len(kafka_dynamic) < len(refused) else "")
                )  # fmt: skip
            raise DynamicConfigError(f"Cannot update these configs dynamically: {refused}")
        per_broker = sorted(k for k in config if k in PER_BROKER_KEYS)
        if per_broker and entity == DEFAULT_ENTITY:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {per_broker}"
            )
        with self._lock:
            if entity == DEFAULT_ENTITY:
                self._effective(self._broker, config)
            else:
                self._effective(config, self._default)

    def alter(self, entity: str, config: Mapping[str, str], *, validate_only: bool = False) -> None:
        """Make ``config`` the whole of ``entity``'s dynamic configs: check, store, apply.
        Blocks on the store. Raises :class:`DynamicConfigError`."""
        self.check(entity, config)
        if validate_only:
            return
        with self._lock:
            self._store.write(entity, config)
            self._set(entity, dict(config))
        log.info("broker %s: dynamic configs of %s set to %s", self.entity, entity, dict(config))

    def _set(self, entity: str, config: dict[str, str]) -> None:
        """Swap in ``entity``'s configs and apply the result (lock held)."""
        if entity == DEFAULT_ENTITY:
            if config == self._default:
                return
            self._default = config
        elif entity == self.entity:
            if config == self._broker:
                return
            self._broker = config
        else:
            return
        self._apply(self._effective(self._broker, self._default))

    # -- lifecycle -----------------------------------------------------------------------

    def load(self) -> None:
        """Read both levels from the store and apply them (at startup, before serving; blocks).
        Stored values that no longer pass (a key Sluice stopped serving) are logged and
        skipped, as Kafka skips invalid dynamic configs at startup."""
        with self._lock:
            for entity in (DEFAULT_ENTITY, self.entity):
                stored = self._store.read(entity)
                usable = {k: v for k, v in stored.items() if k in ACCEPTED_KEYS}
                if usable != stored:
                    log.error("broker %s: ignoring dynamic configs of %s it cannot apply: %s",
                              self.entity, entity, sorted(set(stored) - set(usable)))  # fmt: skip
                try:
                    self.check(entity, usable)
                except DynamicConfigError as exc:
                    log.error("broker %s: ignoring the dynamic configs of %s: %s",
                              self.entity, entity, exc)  # fmt: skip
                    continue
                self._set(entity, usable)

    def watch(self, zk: KazooClient) -> None:
        """Cluster mode: re-read this broker's and the default's configs whenever a change
        notification names them (kazoo's thread), so another broker's alter applies here."""
        # The first broker of a new cluster starts before /config/changes exists (brokers make
        # the persistent paths as they register), and kazoo drops a watch on a missing znode.
        zk.ensure_path(ConfigChangesZNode.path())
        zk.ChildrenWatch(ConfigChangesZNode.path(), self._on_changes(zk))

    def stop(self) -> None:
        self._stopped = True

    def _on_changes(self, zk: KazooClient) -> Callable[[list[str]], bool | None]:
        def changed(children: list[str]) -> bool | None:
            if self._stopped:
                return False
            try:
                self._process(zk, children)
            except Exception:  # a watch that raises is never called again
                log.exception("broker %s: processing broker config changes", self.entity)
            return None

        return changed

    def _process(self, zk: KazooClient, children: list[str]) -> None:
        numbered = sorted(
            (seq, child)
            for child in children
            if (seq := ConfigChangeNotificationZNode.sequence(child)) is not None
        )
        if self._seen_change is None:  # the first call: load() read the current state
            self._seen_change = numbered[-1][0] if numbered else -1
            return
        entities: set[str] = set()
        for seq, child in numbered:
            if seq <= self._seen_change:
                continue
            self._seen_change = seq
            try:
                data, _ = zk.get(f"{ConfigChangesZNode.path()}/{child}")
                kind, name = ConfigChangeNotificationZNode.decode(child, data)
            except (NoNodeError, ZkDataError):
                continue
            if kind == "brokers" and name in (DEFAULT_ENTITY, self.entity):
                entities.add(name)
        for entity in sorted(entities):
            try:
                config = self._store.read(entity)
                with self._lock:
                    self.check(entity, config)
                    self._set(entity, config)
            except (DynamicConfigError, ZkDataError) as exc:
                log.error("broker %s: ignoring the dynamic configs of %s: %s",
                          self.entity, entity, exc)  # fmt: skip


def store_for(config: BrokerConfig, zk: KazooClient | None) -> DynamicConfigStore:
    """ZooKeeper in cluster mode, the file in the first log dir standalone."""
    return FileConfigStore(config.log_dirs[0]) if zk is None else ZkConfigStore(zk)


def entity_of(resource_name: str) -> str:
    """The store's entity of a ``BROKER`` resource name: ``""`` is the cluster default."""
    return resource_name or DEFAULT_ENTITY


__all__ = [
    "DEFAULT_ENTITY",
    "ACCEPTED_KEYS",
    "DYNAMIC_KEYS",
    "LOG_KEYS",
    "UNUSED_KEYS",
    "DynamicBrokerConfig",
    "DynamicConfigError",
    "DynamicConfigStore",
    "FileConfigStore",
    "ZkConfigStore",
    "entity_of",
    "store_for",
]
