"""``BrokerProcess``: a real Sluice broker (``python -m sluice broker start``) as a child process.

Callers talk to it the way users do — over TCP on 127.0.0.1 with real clients — and stop it
the way operators do: SIGTERM for a clean shutdown (exit code 0, the clean-shutdown marker
written), SIGKILL for a crash. ``port`` and ``log_dir`` are fixed for the object's life, so
:meth:`~BrokerProcess.restart` brings the same broker back on the same address with the same
data.

The command line::

    python -m sluice broker start [--log-level LEVEL] \
        --override listeners=PLAINTEXT://127.0.0.1:<port> --override log.dirs=<log_dir> \
        --override offsets.topic.num.partitions=1 [--override broker.id=<id> \
        --override zookeeper.connect=<host:port/chroot>] [--override key=value ...]

Standalone unless ``broker_id`` and ``zookeeper_connect`` are given (cluster mode; see
``sluice.testing.cluster`` for N of them). Every key of ``overrides`` wins over the defaults.
With ``max_open_files`` the broker runs under ``sh -c 'ulimit -n N && exec …'``: the shell
execs, so the pid stays the broker's.

Readiness is an answered ApiVersions request, not just an accepted TCP connection: the broker
listens only after it has loaded (and if need be recovered) its logs, and answering proves the
request path works. The probe is a few bytes by hand (``sluice.broker.protocol``), no client.
A secured broker (``protocol`` other than PLAINTEXT: its one listener is
``<protocol>://127.0.0.1:<port>``) is probed over TLS with ``probe_tls`` when the protocol
uses TLS; ApiVersions is answered before SASL authentication, so SASL needs nothing more.

Not thread-safe: one thread drives a broker; ``bootstrap`` may be read from any thread.
"""

from __future__ import annotations

import socket
import ssl
import struct
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from sluice.broker.log.log_manager import CLEAN_SHUTDOWN_FILE
from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.testing.net import free_port, wait_until
from sluice.testing.process import ChildProcess

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0

_SIZE = struct.Struct(">i")


class UncleanShutdownError(RuntimeError):
    """A broker stopped with SIGTERM exited non-zero or left no clean-shutdown marker."""


class BrokerProcess(ChildProcess):
    """One broker on ``127.0.0.1:<port>`` with its data in ``log_dir`` (``<base_dir>/data``
    unless given) and its output in ``<base_dir>/broker.out``; see the module docstring.

    ``overrides`` are ``--override key=value`` settings (Kafka's key names) on top of the few
    every broker here gets: its listener, its log dir and a one-partition
    ``__consumer_offsets``. With ``metrics_port`` it serves Prometheus metrics there;
    ``log_level`` is its ``--log-level`` (the CLI's default, info, when None).
    """

    def __init__(
        self,
        base_dir: Path,
        overrides: Mapping[str, str] | None = None,
        *,
        port: int | None = None,
        broker_id: int | None = None,
        zookeeper_connect: str | None = None,
        metrics_port: int | None = None,
        max_open_files: int | None = None,
        log_level: str | None = None,
        log_dir: Path | None = None,
        protocol: str = "PLAINTEXT",
        probe_tls: ssl.SSLContext | None = None,
    ) -> None:
        self.base_dir = Path(base_dir).absolute()  # the broker runs in it: no relative paths
        super().__init__(
            self.base_dir / "broker.out",
            name="the broker",
            cwd=self.base_dir,
            start_timeout=START_TIMEOUT,
            stop_timeout=STOP_TIMEOUT,
        )
        self.log_dir = Path(log_dir).absolute() if log_dir is not None else self.base_dir / "data"
        self.port = port or free_port()
        self.metrics_port = metrics_port
        self.max_open_files = max_open_files
        self.log_level = log_level
        self.protocol = protocol
        self.probe_tls = probe_tls
        self.overrides: dict[str, str] = {}
        if broker_id is not None:
            self.overrides["broker.id"] = str(broker_id)
        if zookeeper_connect is not None:
            self.overrides["zookeeper.connect"] = zookeeper_connect
        if metrics_port is not None:
            self.overrides["metrics.listener"] = f"http://127.0.0.1:{metrics_port}"
        self.overrides.update(overrides or {})

    @property
    def bootstrap(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        return f"127.0.0.1:{self.port}"

    @property
    def clean_shutdown_marker(self) -> Path:
        return self.log_dir / CLEAN_SHUTDOWN_FILE

    def command(self) -> list[str]:
        settings = {
            "listeners": f"{self.protocol}://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
            "offsets.topic.num.partitions": "1",
            **self.overrides,
        }
        args = [sys.executable, "-m", "sluice", "broker", "start"]
        if self.log_level is not None:
            args += ["--log-level", self.log_level]
        for key, value in settings.items():
            args += ["--override", f"{key}={value}"]
        if self.max_open_files is not None:
            # The shell sets the limit and execs, so the pid stays the broker's.
            args = ["sh", "-c", f'ulimit -n {self.max_open_files} && exec "$@"', "sh", *args]
        return args

    def ready(self) -> bool:
        return self.answers(timeout=1.0)

    def answers(self, timeout: float = 2.0) -> bool:
        """Whether the broker answers an ApiVersions request within ``timeout`` seconds."""
        return answers_api_versions(self.port, timeout, self.probe_tls)

    def restart(self, *, kill: bool = False, timeout: float = START_TIMEOUT) -> Self:
        """Stop (or kill) the broker and start it again on the same port and log dir. A
        SIGTERM stop must exit 0 and leave the clean-shutdown marker
        (:class:`UncleanShutdownError`)."""
        if kill:
            self.kill()
        else:
            code = self.stop()
            marker = self.clean_shutdown_marker.exists()
            if code != 0 or not marker:
                raise UncleanShutdownError(
                    f"SIGTERM: expected exit code 0 and {self.clean_shutdown_marker.name}, "
                    f"found {code} and {'it' if marker else 'no marker'}:\n{self.output_tail()}"
                )
        return self.start(timeout)

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        config: Mapping[str, str] | None = None,
        *,
        replication_factor: int = 1,
    ) -> None:
        """:func:`create_topic` on this broker."""
        create_topic(
            self.bootstrap, name, partitions, config, replication_factor=replication_factor
        )


def answers_api_versions(port: int, timeout: float, tls: ssl.SSLContext | None = None) -> bool:
    """Whether something on ``127.0.0.1:port`` answers ApiVersions v0 without an error, within
    ``timeout`` seconds (connect, send, read), over TLS with ``tls``. Thread-safe."""
    body = build(request_type(ApiKey.API_VERSIONS, 0), {})
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
            sock = tls.wrap_socket(raw, server_hostname="127.0.0.1") if tls else raw
            with sock:
                sock.sendall(encode_request(1, "sluice-testing", body))
                prefix = _recv_exactly(sock, _SIZE.size)
                if prefix is None:
                    return False
                frame = _recv_exactly(sock, _SIZE.unpack(prefix)[0])
    except OSError:
        return False
    if frame is None:
        return False
    correlation_id, response = decode_response(frame, ApiKey.API_VERSIONS, 0)
    return correlation_id == 1 and int(response.error_code) == 0 and bool(response.api_keys)


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    replication_factor: int = 1,
    timeout: float = 15.0,
) -> None:
    """Create a topic with confluent-kafka's AdminClient, the way users do, and wait until
    Metadata shows all its partitions with a leader — as a consumer will read it. A failed
    creation raises ``KafkaException``; metadata that does not settle raises
    ``WaitTimeoutError``. Thread-safe."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, replication_factor, config=dict(config or {}))
    admin.create_topics([topic], operation_timeout=10)[name].result(timeout=timeout)

    def visible() -> bool:
        found: Any = admin.list_topics(name, timeout=5).topics.get(name)
        return (
            found is not None
            and found.error is None
            and len(found.partitions) == partitions
            and all(p.leader >= 0 for p in found.partitions.values())
        )

    wait_until(visible, timeout, f"topic {name} to show {partitions} partitions with leaders")
