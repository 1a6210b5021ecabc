"""ActiveMQ "Classic" from Debian's ``activemq``, over STOMP with ``stomp.py``.

Start (the broker's Java main in the foreground, with a generated configuration)::

    java -Xms256m -Xmx1g <the --add-opens of Debian's /usr/bin/activemq> \\
        -Dactivemq.home=/usr/share/activemq -Dactivemq.base=<tmp> -Dactivemq.conf=<tmp>/conf \\
        -Dactivemq.data=<tmp>/data -Dactivemq.classpath=<tmp>/conf \\
        -Dlog4j2.configurationFile=<tmp>/conf/log4j2.properties -Djava.io.tmpdir=<tmp>/tmp \\
        -jar /usr/share/activemq/bin/activemq.jar start xbean:file:<tmp>/conf/activemq.xml

``activemq.xml`` (``CONFIG`` below): no JMX, no advisories, no scheduler, no web console; KahaDB
persistence in ``<tmp>/data/kahadb`` with ``journalDiskSyncStrategy="periodic"`` (the journal is
fsynced once a second, not per message: the paper's "flush asynchronously") and a checkpoint
every 2 s; one transport connector, STOMP on 127.0.0.1:<port>. Ready when a STOMP CONNECT is
answered. Stop: SIGTERM to its process group.

What "batch" means (``persistent:true`` messages to a queue):

* ``batch 1``  — each SEND carries a ``receipt`` header; the next is sent once it is answered.
* ``batch 50`` — a STOMP transaction: BEGIN, 50 SENDs, COMMIT with a receipt; the next
  transaction starts once the commit is answered.

Reads: SUBSCRIBE with ``ack:auto`` (the paper's automatic acknowledgement) and
``activemq.prefetchSize:1000``.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.peers import (
    MESSAGE,
    Read,
    Sampler,
    Server,
    apt_install,
    deb_version,
    pip_install,
)
from sluice.testing.net import free_port, port_open

HOME = Path("/usr/share/activemq")

MODES = {
    "batch 1": "persistent SEND with a receipt awaited per message",
    "batch 50": "STOMP transaction of 50 persistent SENDs, COMMIT receipt awaited",
}
BATCH = {"batch 1": 1, "batch 50": 50}

CONFIG = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans
    http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
    http://activemq.apache.org/schema/core
    http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="sluicebench"
          useJmx="false" advisorySupport="false" schedulerSupport="false" persistent="true"
          dataDirectory="{data}">
    <persistenceAdapter>
      <kahaDB directory="{data}/kahadb" journalDiskSyncStrategy="periodic"
              journalDiskSyncInterval="1000" checkpointInterval="2000"/>
    </persistenceAdapter>
    <systemUsage>
      <systemUsage>
        <storeUsage><storeUsage limit="8 gb"/></storeUsage>
        <tempUsage><tempUsage limit="1 gb"/></tempUsage>
      </systemUsage>
    </systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""

LOG4J = """rootLogger.level=WARN
rootLogger.appenderRef.console.ref=Console
appender.console.type=Console
appender.console.name=Console
appender.console.layout.type=PatternLayout
appender.console.layout.pattern=%d %5p | %m%n
"""

JAVA_OPENS = [
    "--add-reads=java.xml=java.logging",
    "--add-opens", "java.base/java.security=ALL-UNNAMED",
    "--add-opens", "java.base/java.net=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens", "java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent.atomic=ALL-UNNAMED",
]  # fmt: skip


def install() -> None:
    apt_install(["activemq", "default-jre-headless"])
    try:
        import stomp  # noqa: F401
    except ImportError:
        pip_install("stomp.py>=8")


def version() -> str:
    import stomp

    raw = stomp.__version__
    ver = raw if isinstance(raw, str) else ".".join(str(v) for v in raw)
    return f"activemq {deb_version('activemq')}, stomp.py {ver}"


class ActiveMQServer(Server):
    name = "activemq"

    def __init__(self, start_timeout: float = 120.0) -> None:
        super().__init__(start_timeout)
        self.port = free_port()
        self.data_dir = self.work / "data"

    def launch(self) -> None:
        install()
        conf = self.work / "conf"
        conf.mkdir()
        (self.work / "tmp").mkdir()
        (conf / "activemq.xml").write_text(CONFIG.format(data=self.data_dir, port=self.port))
        (conf / "log4j2.properties").write_text(LOG4J)
        w = self.work
        self.proc = self.spawn([
            "java", "-Xms256m", "-Xmx1g", *JAVA_OPENS,
            f"-Dactivemq.classpath={conf}", f"-Dactivemq.home={HOME}",
            f"-Dactivemq.base={w}", f"-Dactivemq.conf={conf}", f"-Dactivemq.data={self.data_dir}",
            f"-Dlog4j2.configurationFile={conf / 'log4j2.properties'}",
            f"-Djava.io.tmpdir={w / 'tmp'}",
            "-jar", str(HOME / "bin" / "activemq.jar"),
            "start", f"xbean:file:{conf / 'activemq.xml'}",
        ])  # fmt: skip
        self.wait_until(self._answers, "STOMP CONNECTED")

    def _answers(self) -> bool:
        if not port_open(self.port):
            return False
        try:
            self.connect(listener=None).disconnect()
            return True
        except Exception:
            return False

    def connect(self, listener: Any) -> Any:
        import stomp

        conn = stomp.Connection12(
            [("127.0.0.1", self.port)], auto_decode=False, heartbeats=(0, 0),
            reconnect_attempts_max=1,
        )  # fmt: skip
        if listener is not None:
            conn.set_listener("bench", listener)
        conn.connect(wait=True)
        return conn


class _Listener:
    """Receipts and messages from the stomp.py receiver thread."""

    def __init__(self, wanted: int = 0) -> None:
        self.cond = threading.Condition()
        self.receipts: set[str] = set()
        self.errors: list[str] = []
        self.wanted = wanted
        self.seen = 0
        self.first: float | None = None
        self.done = threading.Event()

    # stomp.py calls whichever of these exist.
    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.receipts.add(frame.headers.get("receipt-id", ""))
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        with self.cond:
            self.errors.append(frame.headers.get("message", str(frame)))
            self.cond.notify_all()

    def on_message(self, _frame: Any) -> None:
        if self.first is None:
            self.first = time.perf_counter()
        self.seen += 1
        if self.seen >= self.wanted:
            self.done.set()

    def wait_receipt(self, receipt: str, timeout: float = 120.0) -> None:
        with self.cond:
            ok = self.cond.wait_for(lambda: receipt in self.receipts or self.errors, timeout)
            if self.errors:
                raise RuntimeError(f"activemq: {self.errors[0]}")
            if not ok:
                raise RuntimeError(f"activemq: no receipt {receipt} in {timeout}s")
            self.receipts.discard(receipt)


class ActiveMQDriver:
    system = "activemq"
    MODES = MODES
    REREADABLE = False  # delivered messages leave the queue: one pass per read

    def __init__(self, server: ActiveMQServer) -> None:
        self.server = server

    def produce(self, queue: str, count: int, mode: str, sampler: Sampler) -> float:
        batch = BATCH[mode]
        listener = _Listener()
        conn = self.server.connect(listener)
        dest = f"/queue/{queue}"
        payload = os.urandom(MESSAGE)
        try:
            sampler.restart()
            start = time.perf_counter()
            sent = 0
            while sent < count:
                n = min(batch, count - sent)
                receipt = f"r{sent}"
                if batch == 1:
                    conn.send(dest, payload, headers={"persistent": "true", "receipt": receipt})
                else:
                    tx = conn.begin()
                    for _ in range(n):
                        conn.send(dest, payload, headers={"persistent": "true"}, transaction=tx)
                    conn.commit(tx, headers={"receipt": receipt})
                listener.wait_receipt(receipt)
                sent += n
                sampler.observe(sent)
            seconds = time.perf_counter() - start
            sampler.finish()
            return seconds
        finally:
            conn.disconnect()

    def _read(self, queue: str, count: int, timeout: float) -> Read:
        listener = _Listener(wanted=count)
        conn = self.server.connect(listener)
        try:
            start = time.perf_counter()
            conn.subscribe(
                f"/queue/{queue}", id="1", ack="auto",
                headers={"activemq.prefetchSize": "1000"},
            )  # fmt: skip
            listener.done.wait(timeout)
            seconds = time.perf_counter() - start
            first = None if listener.first is None else listener.first - start
            return Read(count, listener.seen, seconds, first)
        finally:
            conn.disconnect()

    def consume(self, queue: str, count: int, timeout: float, min_seconds: float = 0.0) -> Read:
        return self._read(queue, count, timeout)

    def first_message(self, queue: str, timeout: float) -> tuple[str, float | None]:
        # ack:auto takes every delivered message off the queue: use a queue of its own.
        return "SUBSCRIBE", self._read(queue, 1, timeout).first


def java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return out.stderr.splitlines()[0] if out.stderr else "java ?"
