"""docs/cluster.md's recipe, run as the page shows it: a Spark master, two workers and the
nightly load through ``spark-submit``, on this machine, from a fresh copy of the repository, with
the venv not activated.

The page marks each command block it means to be run with an HTML comment,
``<!-- recipe: NAME -->``, on the line before the fence. The test runs those blocks' text
unchanged with ``bash``, each from the copy's top folder, in an environment a new terminal has
— ``HOME``, ``PATH=/usr/bin:/bin`` (no venv on it, no ``VIRTUAL_ENV``), the machine's ``PIP_*``
settings and ``JAVA_HOME`` if set:

* ``package`` builds the zip the executors import Sluice from;
* ``spark-home`` is what the page asks for in every terminal, so it runs before each of the
  next three, as a terminal's first command;
* ``master``, ``worker-1`` and ``worker-2`` run in the background, each in its own process
  group, until the test ends; they are ready when the master's JSON lists both workers ALIVE,
  bound to 127.0.0.1 and with their web UIs off 8081 (the registry's port);
* ``load`` runs to its end and must exit 0, its executors running the Python the page names.

What the page asks the reader to do by hand — name a broker with data in
``conf/nightly_load.properties`` — the test does to the copy's file: ``kafka.bootstrap.servers``
and ``topics`` point at the pipeline tests' broker and a topic filled with 5,000 records. The
file's ``table.format=iceberg`` stays: the Iceberg table ``sluice.<topic>`` in the embedded
catalog ``./warehouse/_iceberg_catalog.db``, as the page says, must then hold every produced
record exactly once, and each worker must have run an
executor of the load. The venv is this interpreter's (``sys.prefix``), linked into the copy as
``.venv``: the page's install step (``python3 -m venv``, ``pip install -e``) is the one thing
not run. The recipe's ports (7077, 8080, 8082, 8083, read from the page) must be free; without
them, Java or pyspark the test skips (under ``CI=true`` it fails).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog

from sluice.testing.broker import create_topic
from sluice.testing.ci import in_ci
from sluice.testing.net import wait_until
from sluice.testing.spark_cluster import kill_processes_under, spark_cluster_missing
from tests.pipeline.broker_fixture import produce
from tests.pipeline.load.cluster_load import finish_load, tail

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "cluster.md"
STEPS = ("package", "spark-home", "master", "worker-1", "worker-2", "load")
PATH = "/usr/bin:/bin"
START_TIMEOUT = 180.0  # JVMs start in ~5 s on an idle box; far slower beside other tests
STOP_TIMEOUT = 15.0
RECORDS = 5_000

_BLOCK = re.compile(r"^<!-- recipe: ([\w-]+) -->\n```(?:sh|bash)\n(.*?)^```", re.M | re.S)


def recipe(text: str) -> dict[str, str]:
    """The page's marked blocks by name, in page order; a name used twice is an error."""
    blocks: dict[str, str] = {}
    for match in _BLOCK.finditer(text):
        name, body = match.group(1), match.group(2)
        assert name not in blocks, f"two blocks are marked recipe: {name}"
        blocks[name] = body
    return blocks


def test_the_page_marks_every_step_of_the_recipe_in_order() -> None:
    blocks = recipe(PAGE.read_text(encoding="utf-8"))
    assert tuple(name for name in blocks if name in STEPS) == STEPS
    for name in ("master", "worker-1", "worker-2"):
        assert "--host 127.0.0.1" in blocks[name], f"{name} must bind the loopback address"


def _require(missing: str | None) -> None:
    if missing is not None:
        message = f"the cluster recipe cannot run here: {missing}"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _port_taken(port: int) -> bool:
    """Whether a server could not listen on ``port``: bound as Spark's master and Jetty bind
    (SO_REUSEADDR), so the TIME_WAIT connections a cluster run just before left are no
    obstacle, a listener is."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def _flag(block: str, flag: str) -> int:
    found = re.search(rf"{flag} (\d+)", block)
    assert found is not None, f"no {flag} in {block!r}"
    return int(found.group(1))


def _ports(blocks: dict[str, str]) -> tuple[int, int, list[int]]:
    """The master's port and web UI port, and the workers' web UI ports, as the page names them."""
    workers = [_flag(blocks[name], "--webui-port") for name in ("worker-1", "worker-2")]
    return _flag(blocks["master"], "--port"), _flag(blocks["master"], "--webui-port"), workers


def _copy_of_the_repository(target: Path) -> Path:
    """The files a clone would hold — tracked and new ones git does not ignore, as they are in
    the work tree — copied to ``target``, with this interpreter's venv linked as ``.venv``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True, timeout=60,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():  # a file deleted in the work tree but still in the index is not
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(Path(sys.prefix), target_is_directory=True)
    return target


def _terminal_env() -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k == "JAVA_HOME"}
    return {**keep, "HOME": os.environ.get("HOME", "/root"), "PATH": PATH}


def _master_state(web_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        state: dict[str, Any] = json.loads(response.read())
    return state


def _set(config: Path, key: str, value: str) -> None:
    text, count = re.subn(rf"^{re.escape(key)}=.*$", f"{key}={value}", config.read_text(),
                          flags=re.M)  # fmt: skip
    assert count == 1, f"{config.name} should set {key} once, found {count}"
    config.write_text(text)


class Terminal:
    """One block run in the background, as in a terminal of its own: its own process group,
    its output in ``log``."""

    def __init__(self, name: str, script: str, cwd: Path, env: dict[str, str], log: Path):
        self.name, self.log = name, log
        with open(log, "w") as out:  # the child holds its own copy of the descriptor
            self.process = subprocess.Popen(
                ["bash", "-c", script], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def check_running(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited with {self.process.returncode}:\n"
                                 f"{tail(self.log)}")  # fmt: skip

    def stop(self) -> None:
        """SIGTERM to the group (Ctrl-C's effect on spark-class), then SIGKILL."""
        for sig, wait in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, STOP_TIMEOUT)):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.process.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture
def terminals(tmp_path: Path) -> Iterator[list[Terminal]]:
    started: list[Terminal] = []
    try:
        yield started
    finally:
        for terminal in reversed(started):
            terminal.stop()
        kill_processes_under(tmp_path)  # executors and Python workers the workers left


@pytest.mark.slow
@pytest.mark.broker
@pytest.mark.timeout(900)
def test_the_cluster_recipe_loads_every_record_once(
    kafka_broker: Any, topic_name: str, tmp_path: Path, terminals: list[Terminal]
) -> None:
    blocks = recipe(PAGE.read_text(encoding="utf-8"))
    _require(spark_cluster_missing())
    if shutil.which("java", path=PATH) is None:
        _require(f"no `java` on {PATH}, where the recipe's terminals look for it")
    if sys.prefix == sys.base_prefix:
        _require("the tests do not run in a venv, which the recipe names as .venv")
    master_port, master_web, worker_webs = _ports(blocks)
    taken = [p for p in (master_port, master_web, *worker_webs) if _port_taken(p)]
    if taken:
        _require(f"the recipe's ports {taken} are taken on 127.0.0.1")

    clone = _copy_of_the_repository(tmp_path / "sluice")
    env = _terminal_env()
    create_topic(kafka_broker.bootstrap, topic_name, 2)
    produced = produce(
        kafka_broker.bootstrap,
        [{"topic": topic_name, "partition": i % 2, "key": str(i).encode(), "value": b"v" * 100}
         for i in range(RECORDS)],
    )  # fmt: skip
    config = clone / "conf" / "nightly_load.properties"
    _set(config, "kafka.bootstrap.servers", kafka_broker.bootstrap)
    _set(config, "topics", topic_name)

    package = subprocess.run(["bash", "-c", blocks["package"]], cwd=clone, env=env,
                             capture_output=True, text=True, timeout=600)  # fmt: skip
    assert package.returncode == 0, package.stdout[-3000:] + package.stderr[-3000:]
    assert (clone / "dist" / "sluice.zip").is_file()

    def terminal(name: str) -> Terminal:
        script = blocks["spark-home"] + blocks[name]
        started = Terminal(name, script, clone, env, tmp_path / f"{name}.log")
        terminals.append(started)
        return started

    master = terminal("master")

    def master_alive() -> bool:
        master.check_running()
        return _master_state(master_web).get("status") == "ALIVE"

    wait_until(master_alive, START_TIMEOUT, "the master", interval=0.5,
               ignore=(OSError, ValueError))  # fmt: skip
    workers = [terminal("worker-1"), terminal("worker-2")]

    def both_alive() -> list[dict[str, Any]] | None:
        for worker in workers:
            worker.check_running()
        alive = [w for w in _master_state(master_web).get("workers", [])
                 if w.get("state") == "ALIVE"]  # fmt: skip
        return alive if len(alive) == 2 else None

    alive = wait_until(both_alive, START_TIMEOUT, "two ALIVE workers", interval=0.5,
                       ignore=(OSError, ValueError))  # fmt: skip
    assert sorted(w["host"] for w in alive) == ["127.0.0.1", "127.0.0.1"]
    assert sorted(int(w["webuiaddress"].rsplit(":", 1)[1]) for w in alive) == sorted(worker_webs)

    log = tmp_path / "load.log"
    with open(log, "w") as out:
        load = subprocess.Popen(
            ["bash", "-c", blocks["spark-home"] + blocks["load"]], cwd=clone, env=env,
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, text=True,
            start_new_session=True,
        )  # fmt: skip
    status, output = finish_load(load, log)
    assert status == 0, output[-4000:]
    assert f"Spark master spark://127.0.0.1:{master_port}" in output
    assert f"executors run Python {clone}/.venv/bin/python" in output
    warehouse = clone / "warehouse"
    catalog = load_catalog("sluice", type="sql", uri=f"sqlite:///{warehouse}/_iceberg_catalog.db",
                           warehouse=str(warehouse))  # fmt: skip
    table = catalog.load_table(f"sluice.{topic_name}")
    rows = table.scan(selected_fields=("partition", "offset")).to_arrow().to_pylist()
    keys = [(r["partition"], r["offset"]) for r in rows]
    assert len(keys) == len(set(keys)), f"{len(keys) - len(set(keys))} records landed twice"
    assert sorted(keys) == sorted((m.partition, m.offset) for m in produced)
    for index in (1, 2):  # each worker ran an executor of the load
        assert list((clone / "spark-work" / str(index)).glob("app-*/*")), f"worker-{index}"
