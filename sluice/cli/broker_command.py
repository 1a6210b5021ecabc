"""``sluice broker start``: run a broker in the foreground (Kafka's kafka-server-start.sh)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from sluice.broker.config import BrokerConfig, ConfigError
from sluice.common.logging_setup import configure
from sluice.common.properties import PropertiesError, load_properties

log = logging.getLogger("sluice.broker")


def add_parser(sub: Any) -> None:
    broker = sub.add_parser("broker", help="run a broker")
    actions = broker.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="start a broker in the foreground")
    start.add_argument("--config", help="a server.properties file (Kafka's key names)")
    start.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE",
        help="set a config key, over the file (repeatable)",
    )  # fmt: skip
    start.add_argument("--log-level", default="info")
    start.add_argument("--log-format", choices=["logfmt", "json"], default="logfmt")
    start.set_defaults(func=run_start)


def run_start(args: argparse.Namespace) -> int:
    configure(args.log_level, args.log_format)
    try:
        config = BrokerConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, ConfigError) as exc:
        log.error("bad configuration: %s", exc)
        return 2
    from sluice.broker.server.broker import Broker

    try:
        broker = Broker(config)
    except (NotImplementedError, ValueError, OSError) as exc:
        log.error("cannot start: %s", exc)
        return 2
    try:
        asyncio.run(broker.serve())
    except OSError as exc:  # a port cannot be bound: one error line, not a traceback
        log.error("cannot start: %s", exc)
        return 2
    return 0
