"""``docs/configuration.md``, generated from the components' declared keys.

Every configuration Sluice reads declares its keys once, as data, in a module-level
``CONFIG_DEF`` (:mod:`sluice.common.config_def`, after Kafka's ``ConfigDef``); this module
renders them, one section per component, into the page. The page is never edited by hand::

    python -m sluice.cli.config_docs --write docs/configuration.md   # regenerate it
    python -m sluice.cli.config_docs --check docs/configuration.md   # exit 1 if it is stale
    python -m sluice.cli.config_docs                                 # print it

``tests/cli/test_config_docs.py`` fails when the committed page differs from the generated one,
so a key declared, removed or reworded without regenerating the page does not get past CI.

Pure rendering; thread-safe.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sluice.broker import config as broker_config
from sluice.broker.groups import group_coordinator_config
from sluice.broker.transactions import transaction_config
from sluice.common.config_def import ConfigDef
from sluice.pipeline.audit import config as audit_config
from sluice.pipeline.consumer import config as consumer_config
from sluice.pipeline.load import config as load_config
from sluice.pipeline.mirror import config as mirror_config
from sluice.pipeline.table import iceberg_catalog
from sluice.schemas import basic_auth, limits, server

__all__ = ["SECTIONS", "Section", "main", "render"]

COMMAND = "python -m sluice.cli.config_docs --write docs/configuration.md"


@dataclass(frozen=True)
class Section:
    """One component's part of the page: its title, where its keys come from, its tables."""

    title: str
    intro: str
    tables: tuple[tuple[str, ConfigDef], ...]  # (subtitle or "", declarations)

    @property
    def anchor(self) -> str:
        return "-".join(self.title.lower().replace("(", "").replace(")", "").split())


SECTIONS: tuple[Section, ...] = (
    Section(
        "Broker",
        "`conf/standalone.properties` and `conf/cluster/*.properties` (`sluice broker start "
        "--config FILE`), under Kafka's `server.properties` names. A Kafka key Sluice does not "
        "act on is accepted silently; any other unknown key is logged as a warning naming it. "
        "Declared in `sluice.broker.config`.",
        (("", broker_config.CONFIG_DEF),),
    ),
    Section(
        "Transactions",
        "The transaction coordinator's keys, in the broker's file. Declared in "
        "`sluice.broker.transactions.transaction_config`.",
        (("", transaction_config.CONFIG_DEF),),
    ),
    Section(
        "Groups",
        "The group coordinator's keys for KIP-848 consumer groups (`group.protocol=consumer`) "
        "and KIP-932 share groups, in the broker's file, under Kafka 4's names with its "
        "defaults and bounds. Declared in `sluice.broker.groups.group_coordinator_config`.",
        (("", group_coordinator_config.CONFIG_DEF),),
    ),
    Section(
        "Schema registry",
        "`conf/registry.properties` (`sluice registry start --config FILE`), under Confluent's "
        "names where Confluent has one. Declared in `sluice.schemas.server`, "
        "`sluice.schemas.limits` and `sluice.schemas.basic_auth`.",
        (
            ("Server", server.CONFIG_DEF),
            ("Request limits", limits.CONFIG_DEF),
            ("Basic authentication", basic_auth.CONFIG_DEF),
        ),
    ),
    Section(
        "Nightly load",
        "`conf/nightly_load.properties` (`sluice load --config FILE`, or `spark-submit "
        "jobs/nightly_load.py --config FILE`). A key that is neither declared nor in a family is "
        "refused, naming the nearest declared key. Declared in `sluice.pipeline.load.config`.",
        (("", load_config.CONFIG_DEF),),
    ),
    Section(
        "Iceberg tables",
        "The `iceberg.*` keys of a load or an audit with Apache Iceberg tables (see "
        "[iceberg.md](iceberg.md)), in the same file, under the names of Iceberg's Kafka "
        "Connect sink. Declared in `sluice.pipeline.table.iceberg_catalog`.",
        (("", iceberg_catalog.CONFIG_DEF),),
    ),
    Section(
        "Mirror",
        "`conf/mirror.properties` (`sluice mirror run --config FILE`), under MirrorMaker 2's "
        "names where it has one. A key that is neither declared nor in a family is refused, "
        "naming the nearest declared key. Declared in `sluice.pipeline.mirror.config`.",
        (("", mirror_config.CONFIG_DEF),),
    ),
    Section(
        "Audit",
        "`conf/audit.properties` (`sluice audit --config FILE`). A key that is neither "
        "declared nor in a family is refused, naming the nearest declared key. Declared in "
        "`sluice.pipeline.audit.config`.",
        (("", audit_config.CONFIG_DEF),),
    ),
    Section(
        "ZooKeeper consumer",
        "The settings of the ZooKeeper-based consumer connector (a dict or a properties file), "
        "under Kafka 0.8's names. An unknown key is refused, naming the nearest declared key. "
        "Declared in `sluice.pipeline.consumer.config`.",
        (("", consumer_config.CONFIG_DEF),),
    ),
)

_HEADER = f"""# Configuration reference

<!-- Generated from the declared keys; do not edit. Regenerate with:
     {COMMAND} -->

*This page is generated* from each component's declared keys (a module-level `CONFIG_DEF`, see
`sluice.common.config_def`) by `{COMMAND}`. `tests/cli/test_config_docs.py` fails when it is
stale: to change a key, change its declaration and regenerate the page.

Every component reads a Java `.properties` file, and `--override key=value` pairs on top of it.
A missing key, or a blank one (`key=`), takes its default unless its description says
otherwise; a value that does not parse or validate stops the component with one line naming
the key, what was expected and what was found. *Families* (rows without a type) are groups of
keys passed through to a library or read elsewhere.
"""


def render(sections: Sequence[Section] = SECTIONS) -> str:
    """The whole page."""
    parts = [_HEADER, "## Contents\n"]
    parts.append("".join(f"- [{s.title}](#{s.anchor})\n" for s in sections))
    for section in sections:
        parts.append(f"## {section.title}\n\n{section.intro}\n")
        for subtitle, declarations in section.tables:
            if subtitle:
                parts.append(f"### {section.title}: {subtitle}\n")
            parts.append(declarations.to_markdown())
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sluice.cli.config_docs", description=__doc__.splitlines()[0]
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", type=Path, metavar="PAGE", help="write the page to PAGE")
    mode.add_argument("--check", type=Path, metavar="PAGE", help="exit 1 if PAGE is stale")
    args = parser.parse_args(argv)
    page = render()
    if args.write is not None:
        args.write.write_text(page, encoding="utf-8")
        return 0
    if args.check is not None:
        try:
            current = args.check.read_text(encoding="utf-8")
        except FileNotFoundError:
            current = None
        if current != page:
            print(f"{args.check} is stale: regenerate it with {COMMAND}", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
