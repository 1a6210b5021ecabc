"""``sluice broker start`` as a process: how it starts, refuses to start, and stops."""

from __future__ import annotations

import signal
import socket

import pytest

from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.broker_process import StartBroker
from tests.broker.server.clients import Msg, consume, produce, unique

pytestmark = pytest.mark.broker


def _start_fails(broker: BrokerProcess) -> int:
    with pytest.raises(RuntimeError, match="exited with"):
        broker.start()
    assert broker.proc is not None
    return broker.proc.returncode


@pytest.mark.parametrize("which", ["listener", "metrics"])
def test_port_in_use_is_a_clean_refusal(
    tmp_path_factory: pytest.TempPathFactory, which: str
) -> None:
    """Another process holds the port: exit code 2 and one error line, not a traceback, and
    the logs it had already loaded are closed cleanly (the next start needs no recovery)."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        base = tmp_path_factory.mktemp("busy")
        if which == "listener":
            broker = BrokerProcess(base, port=port)
        else:
            broker = BrokerProcess(base, metrics_port=port)
        assert _start_fails(broker) == 2
    output = broker.output()
    assert "address already in use" in output.lower()
    assert "Traceback" not in output
    assert broker.clean_shutdown_marker.exists()


@pytest.mark.parametrize(
    ("key", "value"),
    [("num.partitions", "many"), ("listeners", "127.0.0.1"), ("log.segment.bytes", "3")],
)
def test_bad_configuration_is_refused(
    tmp_path_factory: pytest.TempPathFactory, key: str, value: str
) -> None:
    broker = BrokerProcess(tmp_path_factory.mktemp("badconf"), overrides={key: value})
    assert _start_fails(broker) == 2
    assert "bad configuration" in broker.output()
    assert "Traceback" not in broker.output()


@pytest.mark.slow
def test_sigint_stops_cleanly_too(start_broker: StartBroker) -> None:
    broker = start_broker()
    topic = unique("sigint")
    create_topic(broker.bootstrap, topic)
    produce(broker.bootstrap, topic, [Msg(b"k", b"v")], partition=0)
    assert broker.proc is not None
    broker.proc.send_signal(signal.SIGINT)
    assert broker.proc.wait(timeout=30) == 0
    assert broker.clean_shutdown_marker.exists()
    broker.start()
    assert consume(broker.bootstrap, topic, {0: 1})[0][0].value() == b"v"
