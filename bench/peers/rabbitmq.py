"""RabbitMQ from Debian's ``rabbitmq-server``, driven by ``pika``.

Start (a foreground node of our own; the system service is never touched)::

    epmd -port <epmd> -address 127.0.0.1                   # our own port mapper, stopped after
    /usr/lib/rabbitmq/bin/rabbitmq-server                   # with, in its environment:
      RABBITMQ_NODENAME=sluicebench<port>@localhost  RABBITMQ_NODE_IP_ADDRESS=127.0.0.1
      RABBITMQ_NODE_PORT=<amqp>  RABBITMQ_DIST_PORT=<dist>  ERL_EPMD_PORT=<epmd>
      ERL_EPMD_ADDRESS=127.0.0.1  RABBITMQ_MNESIA_BASE=<tmp>/mnesia  RABBITMQ_LOG_BASE=<tmp>/log
      RABBITMQ_CONFIG_FILE=<tmp>/rabbitmq.conf  RABBITMQ_ENABLED_PLUGINS_FILE=<tmp>/enabled_plugins
      ("[]." — no management plugin)  RABBITMQ_CONF_ENV_FILE=<tmp>/rabbitmq-env.conf (empty)
      HOME=<tmp> (the Erlang cookie)

``rabbitmq.conf`` binds AMQP to 127.0.0.1 and lowers ``disk_free_limit`` to 50 MB. Ready when a
pika connection opens. Stop: SIGTERM to the node's process group, then the epmd.

What "batch" means (persistent messages, ``delivery_mode=2``, to a durable classic queue):

* ``batch 1``  — publisher confirms, one message in flight: publish, wait for its confirm.
* ``batch 50`` — publisher confirms, 50 in flight: publish 50, wait until the broker has
  confirmed all 50 (``multiple`` acks), publish the next 50.

AMQP has no producer-side batching; confirms are RabbitMQ's acknowledgement, sent once a
persistent message is on disk. RabbitMQ does not offer turning that fsync off for a durable
queue, so unlike the other systems its producer acknowledgements include the fsync (batched
by the broker across everything pending).

Reads: ``basic_qos(prefetch_count=1000)`` and ``auto_ack=True`` (the paper's automatic
acknowledgement). Note that RabbitMQ applies the prefetch limit only to unacknowledged
deliveries, so with automatic acks it pushes as fast as TCP flow control allows.
"""

from __future__ import annotations

import os
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

SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")

MODES = {
    "batch 1": "persistent messages, durable queue, publisher confirm awaited per message",
    "batch 50": "persistent messages, durable queue, 50 published then all 50 confirms awaited",
}
WINDOW = {"batch 1": 1, "batch 50": 50}


def install() -> None:
    apt_install(["rabbitmq-server"])
    try:
        import pika  # noqa: F401
    except ImportError:
        pip_install("pika>=1.3")


def version() -> str:
    import pika

    return f"rabbitmq-server {deb_version('rabbitmq-server')}, pika {pika.__version__}"


class RabbitMQServer(Server):
    name = "rabbitmq"

    def __init__(self, start_timeout: float = 120.0) -> None:
        super().__init__(start_timeout)
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.data_dir = self.work / "mnesia"

    def launch(self) -> None:
        install()
        w = self.work
        (w / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            "loopback_users.guest = true\n"
            "disk_free_limit.absolute = 50MB\n"
        )
        (w / "enabled_plugins").write_text("[].\n")
        (w / "rabbitmq-env.conf").write_text("")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(w),
            "LANG": "C.UTF-8",
            "RABBITMQ_NODENAME": f"sluicebench{self.port}@localhost",
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_MNESIA_BASE": str(self.data_dir),
            "RABBITMQ_LOG_BASE": str(w / "log"),
            "RABBITMQ_CONFIG_FILE": str(w / "rabbitmq.conf"),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(w / "advanced.config"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(w / "enabled_plugins"),
            "RABBITMQ_PLUGINS_EXPAND_DIR": str(w / "plugins-expand"),
            "RABBITMQ_CONF_ENV_FILE": str(w / "rabbitmq-env.conf"),
            "RABBITMQ_PID_FILE": str(w / "rabbitmq.pid"),
        }
        # Our own epmd in the foreground, so it is ours to stop (one started by the node
        # daemonizes and outlives it).
        epmd = self.spawn(["epmd", "-port", str(self.epmd_port), "-address", "127.0.0.1"], env)
        self.extra.append(epmd)
        self.wait_until(lambda: port_open(self.epmd_port), "epmd")
        self.proc = self.spawn([str(SERVER)], env)
        self.wait_until(self._answers, "AMQP connection")

    def _answers(self) -> bool:
        import pika

        if not port_open(self.port):
            return False
        try:
            pika.BlockingConnection(self.parameters()).close()
            return True
        except pika.exceptions.AMQPError:
            return False

    def parameters(self) -> Any:
        import pika

        return pika.ConnectionParameters(
            "127.0.0.1", self.port, credentials=pika.PlainCredentials("guest", "guest"),
            heartbeat=0, blocked_connection_timeout=300,
        )  # fmt: skip


class RabbitMQDriver:
    system = "rabbitmq"
    MODES = MODES
    REREADABLE = False  # delivered messages leave the queue: one pass per read

    def __init__(self, server: RabbitMQServer) -> None:
        self.server = server

    def produce(self, queue: str, count: int, mode: str, sampler: Sampler) -> float:
        """Publish ``count`` persistent messages with a window of ``WINDOW[mode]`` unconfirmed
        ones; returns seconds from the first publish to the last confirm."""
        import pika
        from pika.spec import Basic

        window = WINDOW[mode]
        payload = os.urandom(MESSAGE)
        props = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
        state: dict[str, Any] = {"sent": 0, "acked": 0, "error": None, "t0": 0.0, "t1": 0.0}

        def publish_window(ch: Any) -> None:
            n = min(window, count - state["sent"])
            for _ in range(n):
                ch.basic_publish("", queue, payload, props)
            state["sent"] += n

        def on_confirm(frame: Any) -> None:
            method = frame.method
            if isinstance(method, Basic.Nack):
                state["error"] = f"nack for delivery tag {method.delivery_tag}"
                conn.close()
                return
            state["acked"] = max(state["acked"], method.delivery_tag)
            sampler.observe(state["acked"])
            if state["acked"] < state["sent"]:
                return
            if state["sent"] >= count:
                state["t1"] = time.perf_counter()
                conn.close()
            else:
                publish_window(channel[0])

        channel: list[Any] = []

        def on_channel(ch: Any) -> None:
            channel.append(ch)
            ch.queue_declare(
                queue,
                durable=True,
                callback=lambda _f: ch.confirm_delivery(on_confirm, callback=lambda _f: begin(ch)),
            )

        def begin(ch: Any) -> None:
            sampler.restart()
            state["t0"] = time.perf_counter()
            publish_window(ch)

        def on_open_error(_c: Any, err: Any) -> None:
            state["error"] = f"connection failed: {err}"
            conn.ioloop.stop()

        conn = pika.SelectConnection(
            self.server.parameters(),
            on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
            on_open_error_callback=on_open_error,
            on_close_callback=lambda c, _reason: c.ioloop.stop(),
        )  # fmt: skip

        def give_up() -> None:
            state["error"] = f"timed out after {state['acked']} of {count} confirms"
            conn.close()

        conn.ioloop.call_later(max(600.0, count / 50), give_up)
        conn.ioloop.start()
        if state["error"] is not None:
            raise RuntimeError(f"rabbitmq {queue}: {state['error']}")
        sampler.finish()
        return float(state["t1"] - state["t0"])

    def _read(self, queue: str, count: int, timeout: float) -> Read:
        import pika

        conn = pika.BlockingConnection(self.server.parameters())
        try:
            ch = conn.channel()
            ch.queue_declare(queue, durable=True)
            ch.basic_qos(prefetch_count=1000)
            seen = [0]
            first: list[float] = []

            def on_message(_ch: Any, _m: Any, _p: Any, _body: bytes) -> None:
                if not first:
                    first.append(time.perf_counter() - start)
                seen[0] += 1

            start = time.perf_counter()
            ch.basic_consume(queue, on_message, auto_ack=True)
            deadline = start + timeout
            while seen[0] < count and (left := deadline - time.perf_counter()) > 0:
                conn.process_data_events(time_limit=min(0.5, left))
            seconds = time.perf_counter() - start
            return Read(count, seen[0], seconds, first[0] if first else None)
        finally:
            conn.close()

    def consume(self, queue: str, count: int, timeout: float, min_seconds: float = 0.0) -> Read:
        return self._read(queue, count, timeout)

    def first_message(self, queue: str, timeout: float) -> tuple[str, float | None]:
        # Auto-ack takes every delivered message off the queue: use a queue of its own.
        return "basic_consume", self._read(queue, 1, timeout).first
