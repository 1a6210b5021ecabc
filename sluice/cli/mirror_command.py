"""``sluice mirror``: run the mirror, or show its lag.

    sluice mirror [run] --config conf/mirror.properties [--override key=value ...]
    sluice mirror lag   --config conf/mirror.properties [--override key=value ...]
    python -m sluice.cli.mirror_command [run|lag] --config ...

``run`` first asks a broker of every source cluster and of the target for metadata (within
``BROKER_TIMEOUT_S`` each: a cluster that does not answer is exit 3 naming its servers, before
anything is consumed), then mirrors until SIGTERM or SIGINT, finishes and commits the batch in
flight, leaves the groups and exits 0; it exits 1 when a mirror loop failed (nothing
uncommitted was committed: restart it — unless, in exactly-once mode, it was fenced by a newer
mirror with the same group.id, which then runs in its place), 3 when the loop failed because a
cluster stopped answering, and 2 for a bad configuration. Logs go to stderr (logfmt, as the
broker).
``lag`` prints, per source cluster, topic and partition, the group's committed offset, the log
end and the lag (``kafka-consumer-groups --describe``) — every partition the source has now,
partitions added since the mirror last refreshed included (``-`` before their first commit,
their lag counted from the log start) — and exits 0; 1 when a cluster refused, 2 for a bad
configuration, 3 when a source cluster did not answer (within ``BROKER_TIMEOUT_S`` at first,
15 s for each later request). Exit statuses are
``sluice.cli.errors``'; a failure is one line, ``--debug`` adds the traceback.
``add_mirror_parser(subparsers)`` adds ``mirror`` to the ``sluice`` CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from sluice.cli.config_arguments import add_config_arguments
from sluice.cli.errors import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    ServiceUnreachableError,
    report,
    unreachable_cause,
)
from sluice.common.logging_setup import configure
from sluice.common.properties import PropertiesError, load_properties
from sluice.pipeline.mirror.config import MirrorConfig, MirrorConfigError
from sluice.pipeline.mirror.mirror import Mirror, MirrorError, format_lag, mirror_lag

__all__ = [
    "BROKER_TIMEOUT_S",
    "DESCRIPTION",
    "add_mirror_parser",
    "main",
    "run_lag_command",
    "run_mirror_command",
]

DESCRIPTION = (
    "Mirror live clusters into the offline cluster (as MirrorMaker does), or show the "
    "mirror's lag. Exit status: 0 stopped cleanly (run) or lag printed, 1 a mirror loop "
    "failed or a cluster refused, 2 bad configuration, 3 a cluster did not answer (within "
    "10 s at the start)."
)
"""The ``--help`` text: plain words, no reST markup."""

BROKER_TIMEOUT_S = 10.0
"""How long each cluster may take to answer ``run``'s first Metadata request."""


def add_mirror_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``mirror`` (with ``run``, the default, and ``lag``) to ``argparse`` subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mirror",
        help="mirror live clusters into the offline cluster (MirrorMaker), or show its lag",
        description=DESCRIPTION,
    )
    _build(parser)
    return parser


def _build(parser: argparse.ArgumentParser) -> None:
    _add_arguments(parser, None)
    parser.set_defaults(func=run_mirror_command)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    run = actions.add_parser(
        "run", help="mirror until SIGTERM/SIGINT (the default)", description=DESCRIPTION
    )
    _add_arguments(run, argparse.SUPPRESS)
    run.set_defaults(func=run_mirror_command)
    lag = actions.add_parser(
        "lag", help="committed offset, log end and lag per partition", description=DESCRIPTION
    )
    _add_arguments(lag, argparse.SUPPRESS)
    lag.set_defaults(func=run_lag_command)


def _add_arguments(parser: argparse.ArgumentParser, default: Any) -> None:
    # Accepted before and after the action (``mirror --config f lag`` and ``mirror lag
    # --config f``); the action's parser leaves unset values alone (SUPPRESS).
    add_config_arguments(parser, "conf/mirror.properties", default=default)
    parser.add_argument(
        "--log-level", default="info" if default is None else default, help="default info"
    )
    parser.add_argument(
        "--log-format",
        choices=["logfmt", "json"],
        default="logfmt" if default is None else default,
    )


def _config(args: argparse.Namespace, command: str) -> MirrorConfig | None:
    """The parsed config, or None after printing why it is bad."""
    debug = bool(getattr(args, "debug", False))
    if not args.config:
        report(f"mirror {command}", EXIT_USAGE, "expected --config <file>, found none", debug)
        return None
    try:
        return MirrorConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, MirrorConfigError) as exc:
        report(f"mirror {command}", EXIT_USAGE, f"bad configuration: {exc}", debug)
        return None


def preflight(config: MirrorConfig, *, target: bool = True) -> None:
    """Raise ``ServiceUnreachableError`` unless a broker of every source cluster (and of the
    target, with ``target``) answers a Metadata request within ``BROKER_TIMEOUT_S``.
    librdkafka's connection failures are counted and named in the message, not streamed."""
    from sluice.pipeline.source.metadata import KafkaMetadata, MetadataError

    clusters = [
        (f"{s.alias}.bootstrap.servers", s.bootstrap_servers, config.source_client_config(s))
        for s in config.sources
    ]
    if target:
        clusters.append(
            ("target.bootstrap.servers", config.target_bootstrap_servers, config.admin_config())
        )
    for key, servers, settings in clusters:
        # A consumer handle asks; it needs a group.id but never joins the group.
        settings = {**settings, "group.id": config.group_id}
        try:
            with KafkaMetadata(settings, timeout_s=BROKER_TIMEOUT_S) as metadata:
                metadata.partitions_per_topic()
        except MetadataError as exc:
            if type(exc) is not MetadataError:  # a refused login: the cluster answered
                continue  # the loop meets it and says so (exit 1)
            found = str(exc).removeprefix("metadata request: expected an answer, found ")
            raise ServiceUnreachableError(
                f"{key}: expected a broker of {servers} to answer within "
                f"{BROKER_TIMEOUT_S:g}s, found {found}"
            ) from None


def run_mirror_command(args: argparse.Namespace) -> int:
    """Mirror until a signal; returns the exit status."""
    debug = bool(getattr(args, "debug", False))
    configure(args.log_level, args.log_format)
    config = _config(args, "run")
    if config is None:
        return EXIT_USAGE
    try:
        preflight(config)
    except ServiceUnreachableError as exc:
        return report("mirror run", EXIT_UNREACHABLE, f"FAILED: {exc}", debug)
    mirror = Mirror(config)
    previous = {
        sig: signal.signal(sig, lambda *_: mirror.stop()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        try:
            mirror.start()
        except OSError as exc:  # the metrics port cannot be bound
            mirror.stop()
            mirror.wait()
            return report("mirror run", EXIT_USAGE, f"cannot start: {exc}", debug)
        if mirror.wait() == EXIT_OK:
            return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    # The loops logged their errors; the status says whether a cluster went silent.
    silent = [e for e in mirror.errors.values() if unreachable_cause(e) is not None]
    failed = "; ".join(f"{alias}: {exc}" for alias, exc in mirror.errors.items())
    return report(
        "mirror run", EXIT_UNREACHABLE if silent else EXIT_FAILURE, f"FAILED: {failed}", debug
    )


def run_lag_command(args: argparse.Namespace) -> int:
    """Print the lag table; returns the exit status."""
    debug = bool(getattr(args, "debug", False))
    config = _config(args, "lag")
    if config is None:
        return EXIT_USAGE
    try:
        preflight(config, target=False)
        rows = mirror_lag(config)
    except ServiceUnreachableError as exc:
        return report("mirror lag", EXIT_UNREACHABLE, f"FAILED: {exc}", debug)
    except MirrorError as exc:
        code = EXIT_FAILURE if unreachable_cause(exc) is None else EXIT_UNREACHABLE
        return report("mirror lag", code, f"FAILED: {exc}", debug)
    print(format_lag(rows))
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluice.cli.mirror_command", description=DESCRIPTION
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    _build(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
