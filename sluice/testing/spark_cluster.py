"""``SparkCluster``: a real Spark standalone cluster on 127.0.0.1 — a master and N workers, each
a separate JVM started from the project's own pyspark — for tests and benchmarks.

What runs (``<spark>`` is the installed ``pyspark`` folder, the same Spark the driver uses)::

    master    <spark>/bin/spark-class org.apache.spark.deploy.master.Master \
                  --host 127.0.0.1 --port P --webui-port W
    worker i  <spark>/bin/spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P \
                  --cores 1 --memory 1g --work-dir <root>/worker-i/work \
                  --host 127.0.0.1 --port Pi --webui-port Wi
      executor   ...CoarseGrainedExecutorBackend --executor-id E --app-id A \
                  --worker-url spark://Worker@127.0.0.1:Pi      (a child of the worker JVM,
                  working directory <root>/worker-i/work/A/E)
        python   pyspark.daemon and its forked workers           (same working directory)

``spark-class`` ends in ``exec java``, so each process object's pid *is* the JVM. SPARK_HOME is
set to the pyspark folder explicitly: ``pyspark.find_spark_home`` trusts a ``SPARK_HOME`` from
the environment first, and one pointing at another Spark would run a different version.
``SPARK_CONF_DIR`` is an empty ``<root>/conf``, so no ``spark-env.sh`` or ``spark-defaults.conf``
of the machine leaks in. All ports are free ports, so clusters never collide with each other or
with a developer's Spark on 7077/8080.

Directory layout, all under ``root`` and removed by :meth:`SparkCluster.close`::

    conf/                      SPARK_CONF_DIR (empty)
    master/master.log          the master's stdout and stderr
    worker-i/worker.log        the worker's (executor logs: work/<app>/<exec>/stderr)
    worker-i/work/             --work-dir: one folder per application and executor
    worker-i/local/            SPARK_LOCAL_DIRS: shuffle and block-manager files

Readiness: the master is up when its JSON (``http://127.0.0.1:W/json/``) says ``ALIVE``; a
worker when that JSON lists it (by port) as ``ALIVE``. Every wait is bounded
(``start_timeout``); a process that exits or is not ready in time fails the start with its log
tail (:class:`~sluice.testing.process.ProcessExitedError` / ``ProcessNotReadyError``), and a
failed start leaves nothing running.

Memory, for a 2-core box where other tests run beside: master and workers are JVMs of 256 MB
heap (``SPARK_DAEMON_MEMORY``) with the serial GC; a worker offers ``--memory 1g`` to
executors; :meth:`SparkCluster.application_conf` asks for 512 MB executors with one core each.

Python on the executors: PySpark sends each task with the *driver's* idea of the Python
executable (``spark.pyspark.python`` or the driver's ``PYSPARK_PYTHON``), not the worker's. The
driver must name the venv's interpreter — :meth:`SparkCluster.application_conf` and
:meth:`SparkCluster.driver_env` do — or executors would run a bare ``python3`` without the
project's packages. The workers get ``PYSPARK_PYTHON`` too, for anything they start themselves.

A worker "on another machine" (``WorkerSpec(private_paths=...)``): started as ``unshare -m
--propagation private sh -c 'mount -t tmpfs … PATH; …; exec spark-class …'``, so it and every
executor it starts live in their own mount namespace in which each private path is a fresh,
empty tmpfs. Files an executor writes there are invisible to the driver, and the driver's files
there are invisible to the executor — a warehouse ``file://`` path the executors cannot see, as
on any second machine. This needs ``CAP_SYS_ADMIN`` (root, as locally and in CI);
:func:`private_mounts_missing` says why it is not available, and starting such a worker without
it raises :class:`PrivateMountUnavailableError`. The namespace, and its tmpfs with whatever was
written there, goes away with the last process in it.

Faults: :meth:`SparkWorker.kill` (SIGKILL) and :meth:`SparkWorker.stop` (SIGTERM, then SIGKILL)
act on the worker JVM alone — its executors notice the lost worker and exit by themselves;
:meth:`SparkWorker.kill_with_executors` is a lost machine. :meth:`SparkCluster.executors` finds
the executor JVMs (by ``/proc``) and which worker owns each (by ``--worker-url``);
:meth:`ExecutorProcess.kill` sends them SIGKILL or any signal.

Cleanup: :meth:`SparkCluster.close` stops the workers and the master (SIGTERM, then SIGKILL),
SIGKILLs any process whose working directory is still under ``root`` (executors and Python
daemons orphaned by a killed worker), and removes ``root``. It runs on every exit of the ``with``
block and after a failed start.

Not thread-safe: one thread drives a cluster (start, add, kill, close). :attr:`master_url`,
:meth:`SparkCluster.master_state` and :meth:`SparkCluster.executors` may be called from any
thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from types import TracebackType
from typing import Any, Self, cast

from sluice.testing.net import LOOPBACK, free_port, wait_until
from sluice.testing.process import ChildProcess

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"

# Master and worker only route messages and launch executors: a small heap is plenty, the
# serial GC keeps their footprint lean on a shared 2-core box, and the C1 compiler alone
# starts them faster (they never run hot code).
DAEMON_MEMORY = "256m"
DAEMON_JAVA_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
# For drivers and executors of short test jobs (application_conf's default): the same lean
# flags. A benchmark passes ``jvm_options=""`` for the full JIT on long runs.
QUICK_JVM_OPTIONS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
# One JVM takes ~5 s to start on the idle test box; several at once on a loaded one, far more.
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
# A tmpfs only takes the memory that is written to it; this is a ceiling, not a reservation.
PRIVATE_TMPFS_SIZE = "512m"
# Exit status of the worker's shell when a private mount fails (told apart from the JVM's own).
_MOUNT_FAILED = 97


class PrivateMountUnavailableError(RuntimeError):
    """A worker with private paths was asked for, but this process may not create a mount
    namespace or mount a tmpfs (``unshare -m`` needs root / CAP_SYS_ADMIN)."""


def spark_home() -> Path:
    """The installed ``pyspark`` folder — a complete SPARK_HOME (``bin/spark-class``,
    ``jars/``) — found without importing pyspark."""
    spec = find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("pyspark is not installed (pip install -e '.[spark]')")
    return Path(spec.origin).parent


def spark_cluster_missing() -> str | None:
    """Why a :class:`SparkCluster` cannot start here (no Java, no pyspark), or None."""
    if shutil.which("java") is None:
        return "`java` is not on PATH (a JRE 17+ is needed)"
    try:
        home = spark_home()
    except ModuleNotFoundError as exc:
        return str(exc)
    if not (home / "bin" / "spark-class").is_file():
        return f"{home} has no bin/spark-class"
    return None


def private_mounts_missing() -> str | None:
    """Why a worker cannot get private paths here, or None: tries ``unshare -m`` with a small
    tmpfs mounted over a scratch folder (a few milliseconds)."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "`unshare` and `mount` (util-linux) are needed for a worker's private paths"
    with tempfile.TemporaryDirectory(prefix="sluice-unshare-probe-") as scratch:
        probe = [
            "unshare", "-m", "--propagation", "private", "--",
            "mount", "-t", "tmpfs", "-o", "size=1m", "sluice-probe", scratch,
        ]  # fmt: skip
        try:
            done = subprocess.run(probe, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`unshare -m` could not run: {exc}"
    if done.returncode != 0:
        reason = (done.stderr or done.stdout).strip() or f"exit status {done.returncode}"
        return f"`unshare -m` + `mount -t tmpfs` is not permitted here (root needed): {reason}"
    return None


@dataclass(frozen=True)
class WorkerSpec:
    """How to start one worker: what it offers executors, and the paths it must not share with
    the driver (each becomes an empty tmpfs in the worker's own mount namespace)."""

    cores: int = 1
    memory: str = "1g"
    private_paths: tuple[Path, ...] = ()


def _fetch_json(url: str, timeout: float = 5.0) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return cast(dict[str, Any], json.loads(response.read()))


class SparkMaster(ChildProcess):
    """The standalone master JVM; ready when its JSON status is ``ALIVE``."""

    def __init__(self, root: Path, env: dict[str, str], start_timeout: float) -> None:
        super().__init__(
            root / "master" / "master.log",
            name="spark master",
            cwd=root / "master",
            env=env,
            start_timeout=start_timeout,
            stop_timeout=STOP_TIMEOUT,
        )
        self.port = free_port()
        self.webui_port = free_port()

    @property
    def url(self) -> str:
        """``spark://127.0.0.1:P`` — what drivers and workers connect to."""
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def json_url(self) -> str:
        return f"http://{LOOPBACK}:{self.webui_port}/json/"

    def command(self) -> list[str]:
        spark_class = str(spark_home() / "bin" / "spark-class")
        return [spark_class, MASTER_CLASS, "--host", LOOPBACK,
                "--port", str(self.port), "--webui-port", str(self.webui_port)]  # fmt: skip

    def state(self) -> dict[str, Any]:
        """The master's JSON: ``workers`` (id, host, port, cores, state…), ``aliveworkers``,
        ``activeapps``, ``completedapps``, ``status``. Raises ``OSError`` when unreachable."""
        return _fetch_json(self.json_url)

    def ready(self) -> bool:
        try:
            return self.state().get("status") == "ALIVE"
        except (OSError, ValueError):  # not listening yet, or a half-written answer
            return False


class SparkWorker(ChildProcess):
    """One standalone worker JVM (``index`` in its cluster); ready once the master lists it as
    ``ALIVE``. With ``spec.private_paths`` it runs in its own mount namespace (module doc)."""

    def __init__(
        self,
        index: int,
        spec: WorkerSpec,
        master: SparkMaster,
        root: Path,
        env: dict[str, str],
        start_timeout: float,
    ) -> None:
        self.dir = root / f"worker-{index}"
        super().__init__(
            self.dir / "worker.log",
            name=f"spark worker {index}",
            cwd=self.dir,
            env={**env, "SPARK_LOCAL_DIRS": str(self.dir / "local")},
            start_timeout=start_timeout,
            stop_timeout=STOP_TIMEOUT,
        )
        self.index = index
        self.spec = spec
        self.master = master
        self.work_dir = self.dir / "work"
        self.port = free_port()
        self.webui_port = free_port()

    @property
    def url(self) -> str:
        """``spark://Worker@127.0.0.1:Pi``, as its executors' ``--worker-url`` names it."""
        return f"spark://Worker@{LOOPBACK}:{self.port}"

    def command(self) -> list[str]:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "local").mkdir(parents=True, exist_ok=True)
        spark_class = [
            str(spark_home() / "bin" / "spark-class"), WORKER_CLASS, self.master.url,
            "--cores", str(self.spec.cores), "--memory", self.spec.memory,
            "--work-dir", str(self.work_dir), "--host", LOOPBACK,
            "--port", str(self.port), "--webui-port", str(self.webui_port),
        ]  # fmt: skip
        if not self.spec.private_paths:
            return spark_class
        # sh mounts each tmpfs, then execs spark-class (which execs java), so the pid stays the
        # JVM's; spark-class and its arguments come in as "$@", never parsed by the shell.
        mounts = "".join(
            f"mkdir -p {shlex.quote(str(path))} && mount -t tmpfs "
            f"-o size={PRIVATE_TMPFS_SIZE},mode=0755 sluice-private {shlex.quote(str(path))} "
            f"|| {{ echo 'sluice: cannot mount a private tmpfs on '{shlex.quote(str(path))} >&2; "
            f"exit {_MOUNT_FAILED}; }}; "
            for path in self.spec.private_paths
        )
        return ["unshare", "-m", "--propagation", "private", "--",
                "sh", "-c", mounts + 'exec "$@"', "sh", *spark_class]  # fmt: skip

    def ready(self) -> bool:
        try:
            workers = self.master.state().get("workers", [])
        except (OSError, ValueError):
            return False
        return any(w.get("port") == self.port and w.get("state") == "ALIVE" for w in workers)

    def executors(self) -> list[ExecutorProcess]:
        """The executor JVMs this worker started that are still running."""
        return [e for e in _executor_processes() if e.worker_url == self.url]

    def kill_with_executors(self) -> int | None:
        """SIGKILL the worker and every executor it started — a machine lost. The worker's
        exit status."""
        for executor in self.executors():
            executor.kill()
        return self.kill()


@dataclass(frozen=True)
class ExecutorProcess:
    """A running ``CoarseGrainedExecutorBackend`` JVM, as read from ``/proc``."""

    pid: int
    executor_id: str
    app_id: str
    worker_url: str
    cwd: Path | None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` (SIGKILL: the executor dies mid-task); nothing if it is already gone."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, sig)

    def running(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True


def _proc_pids() -> Iterator[int]:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            yield int(entry)


def _cwd(pid: int) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:  # gone, or a kernel thread
        return None


def _executor_processes() -> list[ExecutorProcess]:
    found = []
    for pid in _proc_pids():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
                args = cmdline.read().decode(errors="replace").split("\0")
        except OSError:  # exited while we looked
            continue
        if EXECUTOR_CLASS not in args:
            continue
        options = args[args.index(EXECUTOR_CLASS) + 1 :]
        named = dict(zip(options[::2], options[1::2], strict=False))
        found.append(
            ExecutorProcess(
                pid=pid,
                executor_id=named.get("--executor-id", ""),
                app_id=named.get("--app-id", ""),
                worker_url=named.get("--worker-url", ""),
                cwd=_cwd(pid),
            )
        )
    return found


class SparkCluster:
    """A master and workers (``workers``: a count of default workers, or one
    :class:`WorkerSpec` each) under ``root`` (a fresh temporary folder by default; a given one
    gets a fresh subfolder). See the module doc for what runs and how it is cleaned up."""

    def __init__(
        self,
        workers: int | Sequence[WorkerSpec] = 2,
        *,
        root: Path | None = None,
        python: str = sys.executable,
        start_timeout: float = START_TIMEOUT,
    ) -> None:
        self.specs = [WorkerSpec()] * workers if isinstance(workers, int) else list(workers)
        self._parent = root
        self.python = python
        self.start_timeout = start_timeout
        self.root: Path | None = None
        self.master: SparkMaster | None = None
        self.workers: list[SparkWorker] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> Self:
        """Start the master, then every worker at once, and wait until the master lists them
        all as alive. On any failure everything started is stopped and removed, then it raises."""
        if self.master is not None:
            raise RuntimeError("this SparkCluster was already started")
        if any(spec.private_paths for spec in self.specs):
            _require_private_mounts()
        if self._parent is not None:
            self._parent.mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="sluice-spark-", dir=self._parent))
        try:
            (self.root / "conf").mkdir()
            self.master = SparkMaster(self.root, self._daemon_env(), self.start_timeout)
            self.master.start()
            self._start_workers(self.specs)
        except BaseException:
            self.close()
            raise
        return self

    def add_worker(self, spec: WorkerSpec | None = None) -> SparkWorker:
        """Start one more worker and wait until the master lists it as alive."""
        spec = WorkerSpec() if spec is None else spec
        if spec.private_paths:
            _require_private_mounts()
        return self._start_workers([spec])[0]

    def _start_workers(self, specs: Sequence[WorkerSpec]) -> list[SparkWorker]:
        if self.master is None or self.root is None:
            raise RuntimeError("the SparkCluster is not started")
        started = []
        for spec in specs:
            worker = SparkWorker(
                len(self.workers), spec, self.master, self.root, self._daemon_env(),
                self.start_timeout,
            )  # fmt: skip
            self.workers.append(worker)
            started.append(worker.spawn())
        # The JVMs start side by side; then each is waited for (its own timeout, counted from
        # now: the first wait covers most of the others' start-up too).
        for worker in started:
            try:
                worker.wait_ready()
            except BaseException:
                worker.kill()
                raise
        return started

    def close(self) -> None:
        """Stop workers and master, kill what is left under ``root``, remove ``root``.
        Idempotent; never raises for a process that is already gone."""
        for worker in self.workers:
            worker.stop()
        if self.master is not None:
            self.master.stop()
        if self.root is not None:
            kill_processes_under(self.root)
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- what drivers need -------------------------------------------------------------------

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:P``, for ``SparkSession.builder.master(...)``."""
        return self._master().url

    def application_conf(
        self,
        *,
        cores_max: int | None = None,
        executor_memory: str = "512m",
        jvm_options: str = QUICK_JVM_OPTIONS,
    ) -> dict[str, str]:
        """Spark settings for a driver of this cluster: the master URL, the driver on
        127.0.0.1, the venv's Python on executors, small 1-core executors, ``spark.cores.max``
        (default: every live worker's cores), ``jvm_options`` for driver and executor JVMs
        (default: serial GC, C1 only — quick to start) and no UI. Jobs wait until all those
        executors have registered (``minRegisteredResourcesRatio`` 1.0, at most 60 s), so a
        test's tasks spread over every worker instead of all landing on the first executor up."""
        if cores_max is None:
            cores_max = sum(w.spec.cores for w in self.workers if w.running)
        return {
            "spark.master": self.master_url,
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.pyspark.python": self.python,
            "spark.executor.memory": executor_memory,
            "spark.executor.cores": "1",
            "spark.cores.max": str(cores_max),
            "spark.driver.extraJavaOptions": jvm_options,
            "spark.executor.extraJavaOptions": jvm_options,
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.scheduler.minRegisteredResourcesRatio": "1.0",
            "spark.scheduler.maxRegisteredResourcesWaitingTime": "60s",
        }

    def driver_env(self) -> dict[str, str]:
        """The environment for a driver process (``python``, ``spark-submit``): this
        environment with the same SPARK_HOME as the cluster and the venv's Python for the
        driver and for executors (``PYSPARK_PYTHON``)."""
        return {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": LOOPBACK,
            "PYSPARK_PYTHON": self.python,
            "PYSPARK_DRIVER_PYTHON": self.python,
        }

    # -- observing and faults ----------------------------------------------------------------

    def master_state(self) -> dict[str, Any]:
        """The master's JSON (see :meth:`SparkMaster.state`)."""
        return self._master().state()

    def alive_workers(self) -> list[SparkWorker]:
        """Workers of this cluster the master currently lists as ``ALIVE``."""
        listed = {w.get("port") for w in self.master_state().get("workers", [])
                  if w.get("state") == "ALIVE"}  # fmt: skip
        return [worker for worker in self.workers if worker.port in listed]

    def wait_for_alive_workers(self, count: int, timeout: float = 60.0) -> list[SparkWorker]:
        """Wait until exactly ``count`` workers of this cluster are alive at the master (a
        killed worker drops out as soon as the master sees its connection close)."""
        found = wait_until(
            lambda: (alive,) if len(alive := self.alive_workers()) == count else None,
            timeout,
            f"{count} alive Spark workers at {self._master().json_url}",
            interval=0.2,
            ignore=(OSError, ValueError),
        )
        return found[0]

    def executors(self, app_id: str | None = None) -> list[ExecutorProcess]:
        """Running executor JVMs of this cluster's workers (of one application, if given)."""
        urls = {worker.url for worker in self.workers}
        return [
            e for e in _executor_processes()
            if e.worker_url in urls and (app_id is None or e.app_id == app_id)
        ]  # fmt: skip

    def wait_for_executors(
        self, count: int, app_id: str | None = None, timeout: float = 60.0
    ) -> list[ExecutorProcess]:
        """Wait until at least ``count`` executor JVMs run (of ``app_id``, if given)."""
        return wait_until(
            lambda: found if len(found := self.executors(app_id)) >= count else None,
            timeout,
            f"{count} Spark executors" + (f" of {app_id}" if app_id else ""),
            interval=0.1,
        )

    def worker_of(self, executor: ExecutorProcess) -> SparkWorker:
        """The worker that started ``executor``."""
        for worker in self.workers:
            if worker.url == executor.worker_url:
                return worker
        raise LookupError(f"executor {executor.pid} belongs to {executor.worker_url}, "
                          f"not to a worker of this cluster")  # fmt: skip

    def worker_for_path(self, path: str | Path) -> SparkWorker | None:
        """The worker whose work dir holds ``path`` — e.g. a task's ``os.getcwd()``, which is
        its executor's folder ``<work>/<app>/<executor>``; None if no worker's does."""
        resolved = Path(path).resolve()
        for worker in self.workers:
            if resolved.is_relative_to(worker.work_dir.resolve()):
                return worker
        return None

    def _master(self) -> SparkMaster:
        if self.master is None:
            raise RuntimeError("the SparkCluster is not started")
        return self.master

    def _daemon_env(self) -> dict[str, str]:
        assert self.root is not None
        return {
            "SPARK_HOME": str(spark_home()),
            "SPARK_CONF_DIR": str(self.root / "conf"),
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_DAEMON_JAVA_OPTS": DAEMON_JAVA_OPTS,
            "SPARK_LOCAL_IP": LOOPBACK,
            "PYSPARK_PYTHON": self.python,
        }


def _require_private_mounts() -> None:
    reason = private_mounts_missing()
    if reason is not None:
        raise PrivateMountUnavailableError(reason)


def kill_processes_under(root: Path, timeout: float = STOP_TIMEOUT) -> None:
    """SIGKILL every process whose working directory is under ``root`` — executors and Python
    daemons whose worker was killed (they are not our children) — and wait until they are gone,
    so ``root`` can be removed. Also for clusters started some other way, such as the manual's
    recipe (``tests/docs/test_cluster_recipe.py``)."""
    resolved = root.resolve()

    def remaining() -> list[int]:
        own = os.getpid()
        return [pid for pid in _proc_pids()
                if pid != own and (cwd := _cwd(pid)) is not None
                and cwd.is_relative_to(resolved)]  # fmt: skip

    for pid in remaining():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while remaining() and time.monotonic() < deadline:
        time.sleep(0.05)
