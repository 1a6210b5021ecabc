"""``sluice mirror``: run the mirror, or show its lag.

    sluice mirror [run] --config conf/mirror.properties [--override key=value ...]
    sluice mirror lag   --config conf/mirror.properties [--override key=value ...]
    python -m sluice.cli.mirror_command [run|lag] --config ...

``run`` mirrors until SIGTERM or SIGINT, then finishes and commits the batch in flight, leaves
the groups and exits 0; it exits 1 when a mirror loop failed (nothing uncommitted was
committed: restart it — unless, in exactly-once mode, it was fenced by a newer mirror with the
same group.id, which then runs in its place) and 2 for a bad configuration. Logs go to
stderr (logfmt, as the broker).
``lag`` prints, per source cluster, topic and partition, the group's committed offset, the log
end and the lag (``kafka-consumer-groups --describe``) — every partition the source has now,
partitions added since the mirror last refreshed included (``-`` before their first commit,
their lag counted from the log start) — and exits 0; 1 when a cluster did not
answer, 2 for a bad configuration. ``add_mirror_parser(subparsers)`` adds ``mirror`` to the
``sluice`` CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from typing import Any

from sluice.cli.config_arguments import add_config_arguments
from sluice.common.logging_setup import configure
from sluice.common.properties import PropertiesError, load_properties
from sluice.pipeline.mirror.config import MirrorConfig, MirrorConfigError
from sluice.pipeline.mirror.mirror import Mirror, MirrorError, format_lag, mirror_lag

__all__ = ["add_mirror_parser", "main", "run_lag_command", "run_mirror_command"]


def add_mirror_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``mirror`` (with ``run``, the default, and ``lag``) to ``argparse`` subparsers."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "mirror",
        help="mirror live clusters into the offline cluster (MirrorMaker), or show its lag",
        description=__doc__.split("\n")[0],
    )
    _build(parser)
    return parser


def _build(parser: argparse.ArgumentParser) -> None:
    _add_arguments(parser, None)
    parser.set_defaults(func=run_mirror_command)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    run = actions.add_parser("run", help="mirror until SIGTERM/SIGINT (the default)")
    _add_arguments(run, argparse.SUPPRESS)
    run.set_defaults(func=run_mirror_command)
    lag = actions.add_parser("lag", help="committed offset, log end and lag per partition")
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
    if not args.config:
        print(f"sluice mirror {command}: expected --config <file>, found none", file=sys.stderr)
        return None
    try:
        return MirrorConfig.from_properties(load_properties(args.config, args.override))
    except (PropertiesError, MirrorConfigError) as exc:
        print(f"sluice mirror {command}: bad configuration: {exc}", file=sys.stderr)
        return None


def run_mirror_command(args: argparse.Namespace) -> int:
    """Mirror until a signal; returns the exit status."""
    configure(args.log_level, args.log_format)
    config = _config(args, "run")
    if config is None:
        return 2
    mirror = Mirror(config)
    previous = {
        sig: signal.signal(sig, lambda *_: mirror.stop()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    try:
        try:
            mirror.start()
        except OSError as exc:  # the metrics port cannot be bound
            print(f"sluice mirror run: cannot start: {exc}", file=sys.stderr)
            mirror.stop()
            mirror.wait()
            return 2
        return mirror.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_lag_command(args: argparse.Namespace) -> int:
    """Print the lag table; returns the exit status."""
    config = _config(args, "lag")
    if config is None:
        return 2
    try:
        rows = mirror_lag(config)
    except MirrorError as exc:
        print(f"sluice mirror lag: FAILED: {exc}", file=sys.stderr)
        return 1
    print(format_lag(rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluice.cli.mirror_command", description=__doc__.split("\n")[0]
    )
    _build(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
