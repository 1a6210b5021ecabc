"""``check_topic_config``: a topic's config overrides validated as CreateTopics, AlterConfigs
and IncrementalAlterConfigs validate them.

Shared by the ``topics`` and ``configs`` handlers (a handler never imports another handler).
Pure: reads the broker's log settings, changes nothing; safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping

from sluice.broker.cluster import topic_config as tc
from sluice.broker.cluster.topic_metadata import InvalidConfigError
from sluice.broker.server.context import BrokerContext


def check_topic_config(ctx: BrokerContext, config: Mapping[str, str | None]) -> dict[str, str]:
    """``config`` validated as CreateTopics validates it: Kafka's rules for every key, then the
    log settings for the keys they model. Raises ``InvalidConfigError``."""
    checked = tc.validate(config)
    try:
        # Every Kafka topic key is accepted and stored; the log applies the ones it models
        # (the broker builds a topic's log settings the same way, TopicAdmin.log_config).
        tc.log_settings(ctx.config.log, checked)
    except ValueError as exc:
        raise InvalidConfigError(str(exc)) from None
    return checked
