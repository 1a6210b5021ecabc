"""Run kafka-python's own integration suite, unchanged, against Sluice (``make compat``).

python -m tests.compat.run                            # standalone, then a 3-broker cluster
python -m tests.compat.run --mode cluster             # one deployment
python -m tests.compat.run --kafka-version 3.0.0 --timeout 900

For each mode, from scratch in ``build/compat/<mode>/`` (emptied first):

1. The deployment, through ``sluice.testing``: ``standalone`` is one broker started with
   ``conf/standalone.properties``; ``cluster`` is a ZooKeeper (its own chroot) and brokers
   0, 1 and 2 with ``conf/cluster/broker-{1,2,3}.properties``, waited for until each lists all
   three under one controller. Ids start at 0 because the suite takes the ``KAFKA_URI`` broker
   for node 0. Every broker gets ``--override``s: a free port on 127.0.0.1, a log dir under the
   mode's work dir, metrics off (no fixed port to collide on), and kafka-python's own
   test-broker values ``group.min.session.timeout.ms=1000`` and
   ``group.initial.rebalance.delay.ms=0``; cluster brokers also ``min.insync.replicas=1`` (the
   suite creates replication-factor-1 topics and produces with ``acks=all``).
2. The suite (``tests.compat.sdist``): the venv's pytest on ``test/integration`` in the
   unpacked sdist, with ``KAFKA_URI=PLAINTEXT://127.0.0.1:<broker 0's port>``,
   ``KAFKA_VERSION`` (the broker version the suite gates its tests on), ``KAFKA_ROOT`` (any
   existing directory: the suite's fixture refuses to build even an external broker without
   one), ``-p tests.compat.skips`` (importable through ``PYTHONPATH``) and ``--junitxml``. Its
   output goes to ``pytest.log``. Past ``--timeout`` seconds it gets SIGINT, so pytest still
   writes the report for the tests that ran (SIGKILL if it does not exit after that).
3. The deployment is stopped, whatever happened.

A deployment that fails to start is recorded as the mode's note and the next mode still runs.
The results go to ``build/compat/results.json`` and ``results.md`` (``tests.compat.report``);
modes not run this time are kept from an earlier ``results.json`` of the same client and Kafka
version. The exit status is 1 while any test of the modes run fails or errors, or a mode is
incomplete; 0 otherwise.

Not thread-safe: one run at a time per checkout (the work dirs are fixed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from sluice.testing.broker import BrokerProcess
from sluice.testing.cluster import QUIET, wait_for_metadata
from sluice.testing.net import WaitTimeoutError
from sluice.testing.process import ProcessExitedError, ProcessNotReadyError
from sluice.testing.zookeeper import ZooKeeperMissingError, ZooKeeperServer, new_chroot
from tests.compat import report, sdist

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = REPO / "build" / "compat"
STANDALONE_CONFIG = REPO / "conf" / "standalone.properties"
CLUSTER_CONFIG_DIR = REPO / "conf" / "cluster"  # broker-1.properties .. broker-3.properties
MODES = ("standalone", "cluster")
BROKER_IDS = (0, 1, 2)

# Every broker: no metrics listener (the configs name a fixed port), and the group settings of
# kafka-python's own test-broker template, which its tests rely on: sessions as short as 1 s,
# and no wait before a new group's first rebalance.
BROKER_OVERRIDES = {
    "metrics.listener": "",
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    # kafka-python's own test broker (its fixtures.py) runs the ACL authorizer, open by default
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}
# Cluster brokers: the suite creates replication-factor-1 topics and produces with acks=all.
CLUSTER_OVERRIDES = {**BROKER_OVERRIDES, "min.insync.replicas": "1"}
CLUSTER_START_TIMEOUT = 60.0

# The release Sluice's advertised versions make kafka-python infer (ListOffsets v7, KIP-734:
# Kafka 3.0); the suite's test_kafka_version_infer checks the inference against it.
DEFAULT_KAFKA_VERSION = "3.0.0"
DEFAULT_TIMEOUT = 900.0
# After SIGINT at the timeout, how long pytest gets to write its report before SIGKILL.
INTERRUPT_GRACE = 30.0
# pytest's exit codes 0 (all passed) and 1 (some failed) mean it ran to the end.
PYTEST_COMPLETED = (0, 1)

# What starting a deployment may raise; anything else is a bug here and propagates.
DEPLOYMENT_ERRORS = (
    ProcessExitedError,
    ProcessNotReadyError,
    ZooKeeperMissingError,
    WaitTimeoutError,
    KazooException,
    KazooTimeoutError,
    OSError,
)


class ConfiguredBroker(BrokerProcess):
    """A :class:`~sluice.testing.broker.BrokerProcess` started with ``--config <config>``: the
    file first, then the process's ``--override``s on top (they win)."""

    def __init__(
        self, base_dir: Path, config: Path, overrides: Mapping[str, str], **kwargs: Any
    ) -> None:
        super().__init__(base_dir, overrides, **kwargs)
        self.config = config

    def command(self) -> list[str]:
        args = super().command()
        at = args.index("start") + 1  # python -m sluice broker start
        return [*args[:at], "--config", str(self.config), *args[at:]]


@contextmanager
def standalone(work: Path) -> Iterator[str]:
    """One standalone broker; yields its ``host:port``, stops it on exit."""
    with ConfiguredBroker(work / "broker", STANDALONE_CONFIG, BROKER_OVERRIDES) as broker:
        yield broker.bootstrap


@contextmanager
def cluster(work: Path) -> Iterator[str]:
    """ZooKeeper and brokers 0, 1, 2 on a fresh chroot; yields broker 0's ``host:port`` once
    all three are registered under one controller; stops the brokers, then ZooKeeper, on exit."""
    with ExitStack() as stack:
        zookeeper = stack.enter_context(ZooKeeperServer(work / "zookeeper"))
        connect = zookeeper.connect_string + new_chroot(zookeeper, "compat")
        brokers = [
            ConfiguredBroker(
                work / f"broker-{i}",
                CLUSTER_CONFIG_DIR / f"broker-{i + 1}.properties",
                CLUSTER_OVERRIDES,
                broker_id=i,
                zookeeper_connect=connect,
            )
            for i in BROKER_IDS
        ]
        for broker in brokers:
            stack.enter_context(broker)
        wait_registered(brokers, CLUSTER_START_TIMEOUT)
        yield brokers[0].bootstrap


def wait_registered(brokers: list[ConfiguredBroker], timeout: float) -> None:
    """Until every broker's Metadata lists all :data:`BROKER_IDS` and one of them as the
    controller (each broker answers from its own ZooKeeper view); ``WaitTimeoutError``."""
    admins = [AdminClient({"bootstrap.servers": b.bootstrap, **QUIET}) for b in brokers]

    def settled() -> bool:
        views = [admin.list_topics(timeout=5) for admin in admins]
        controllers = {view.controller_id for view in views}
        return all(set(view.brokers) == set(BROKER_IDS) for view in views) and (
            len(controllers) == 1 and controllers <= set(BROKER_IDS)
        )

    wait_for_metadata(settled, timeout, f"brokers {list(BROKER_IDS)} registered, one controller")


DEPLOYMENTS: dict[str, Callable[[Path], AbstractContextManager[str]]] = {
    "standalone": standalone,
    "cluster": cluster,
}


def run_suite(
    suite: Path, work: Path, bootstrap: str, kafka_version: str, timeout: float
) -> report.ModeResult:
    """The suite in ``suite`` against the broker at ``bootstrap``; see the module docstring."""
    junit = work / "junit.xml"
    junit.unlink(missing_ok=True)
    log_path = work / "pytest.log"
    python_path = os.environ.get("PYTHONPATH", "")
    env = {
        **os.environ,
        "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
        "KAFKA_VERSION": kafka_version,
        "KAFKA_ROOT": str(work),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), python_path) if p),
    }
    command = [
        sys.executable, "-m", "pytest", "test/integration",
        "-p", "tests.compat.skips", "-p", "no:cacheprovider", f"--junitxml={junit}",
    ]  # fmt: skip
    note = ""
    started = time.monotonic()
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, cwd=suite, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            note = f"pytest did not finish within {timeout:.0f} s: interrupted (see {log_path})"
            code = interrupt(process)
        finally:
            if process.poll() is None:  # we are being interrupted ourselves: leave no child
                process.kill()
                process.wait()
    seconds = time.monotonic() - started
    if not junit.is_file():
        return report.ModeResult(
            seconds=seconds,
            note=note or f"pytest exited {code} without a JUnit report ({log_path})",
        )
    if not note and code not in PYTEST_COMPLETED:
        note = f"pytest exited {code} (see {log_path})"
    return report.ModeResult(report.read_junit(junit), seconds, note)


def interrupt(process: subprocess.Popen[bytes]) -> int:
    """SIGINT ``process`` (pytest then reports the tests that ran and exits), SIGKILL it if it
    has not exited :data:`INTERRUPT_GRACE` seconds later; its exit status."""
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=INTERRUPT_GRACE)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def run_mode(mode: str, suite: Path, kafka_version: str, timeout: float) -> report.ModeResult:
    """One deployment from scratch in ``build/compat/<mode>/`` and the suite against it."""
    work = BUILD_DIR / mode
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        with DEPLOYMENTS[mode](work) as bootstrap:
            print(f"compat: {mode}: broker 0 at {bootstrap}; running the suite", flush=True)
            return run_suite(suite, work, bootstrap, kafka_version, timeout)
    except DEPLOYMENT_ERRORS as exc:
        return report.ModeResult(note=f"{mode} deployment failed: {report.one_line(str(exc))}")


def earlier_modes(header: Mapping[str, str]) -> dict[str, report.ModeResult]:
    """The modes of an earlier ``results.json`` for the same header (none if it differs or
    there is no readable file)."""
    path = BUILD_DIR / "results.json"
    if not path.is_file():
        return {}
    try:
        earlier_header, modes = report.read_json(path)
    except report.ReportFormatError:
        return {}
    return modes if earlier_header == dict(header) else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.compat.run",
        description="kafka-python's own integration suite against Sluice brokers.",
    )
    parser.add_argument(
        "--mode",
        choices=[*MODES, "both"],
        default="both",
        help="the deployment(s) to test (default: %(default)s)",
    )
    parser.add_argument(
        "--kafka-version",
        default=DEFAULT_KAFKA_VERSION,
        help="KAFKA_VERSION, the broker version the suite gates tests on (default: %(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds the suite may run per mode (default: %(default).0f)",
    )
    args = parser.parse_args(argv)  # fmt: skip

    version = sdist.installed_version()
    try:
        suite = sdist.suite_tree(BUILD_DIR, version)
    except sdist.SuiteFetchError as exc:
        print(f"compat: {exc}", file=sys.stderr)
        return 1
    header = {"client": f"kafka-python {version}", "kafka_version": args.kafka_version}
    run_now = MODES if args.mode == "both" else (args.mode,)
    results = earlier_modes(header)
    for mode in run_now:
        print(f"compat: {mode}: starting (work dir {BUILD_DIR / mode})", flush=True)
        results[mode] = run_mode(mode, suite, args.kafka_version, args.timeout)
    ordered = {mode: results[mode] for mode in MODES if mode in results}
    report.write_json(BUILD_DIR / "results.json", header, ordered)
    table = report.markdown(header, ordered)
    (BUILD_DIR / "results.md").write_text(table, encoding="utf-8")
    print(table)
    return 0 if all(results[mode].ok for mode in run_now) else 1


if __name__ == "__main__":
    sys.exit(main())
