"""``sluice zookeeper start --config conf/zookeeper.properties``: a development ZooKeeper.

Runs Debian's ZooKeeper (``apt-get install zookeeper``, or ``make system-deps``) in the
foreground, as design.md describes: ``java -cp /etc/zookeeper/conf:/usr/share/java/
zookeeper.jar org.apache.zookeeper.server.quorum.QuorumPeerMain <zoo.cfg>``. The config is
ZooKeeper's own ``zoo.cfg`` format; its ``dataDir`` is created if missing. Production runs
an ensemble managed on its own; this is for a laptop or a test machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from sluice.common.properties import PropertiesError, load_properties

ZK_JAR = Path("/usr/share/java/zookeeper.jar")
# Logging jars that come with Debian's package; without them ZooKeeper prints nothing.
LOG_JARS = [Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar")]


def add_parser(sub: Any) -> None:
    zk = sub.add_parser("zookeeper", help="run a development ZooKeeper (Debian's package)")
    actions = zk.add_subparsers(dest="action", required=True, metavar="ACTION")
    start = actions.add_parser("start", help="start ZooKeeper in the foreground")
    start.add_argument("--config", default="conf/zookeeper.properties")
    start.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    start.set_defaults(func=run_start)


def run_start(args: argparse.Namespace) -> int:
    java = shutil.which("java")
    if java is None or not ZK_JAR.exists():
        print("Debian's zookeeper and a JRE are needed: run `make system-deps` "
              "(apt-get install zookeeper default-jre-headless)", file=sys.stderr)  # fmt: skip
        return 2
    try:
        props = load_properties(args.config, args.override)
    except PropertiesError as exc:
        print(f"bad configuration: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(props.setdefault("dataDir", "./data/zookeeper")).resolve()
    props["dataDir"] = str(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg = data_dir / "zoo.cfg"
    cfg.write_text("".join(f"{k}={v}\n" for k, v in props.items()), encoding="utf-8")
    classpath = ":".join(
        ["/etc/zookeeper/conf", str(ZK_JAR), *(str(j) for j in LOG_JARS if j.exists())]
    )
    command = [java, "-Dzookeeper.root.logger=INFO,CONSOLE", "-cp", classpath,
               "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(cfg)]  # fmt: skip
    print(f"ZooKeeper on {props.get('clientPortAddress', '0.0.0.0')}:"
          f"{props.get('clientPort', '2181')}, data in {data_dir}", file=sys.stderr)  # fmt: skip
    os.execv(java, command)  # the shell's Ctrl-C and SIGTERM go straight to ZooKeeper
