"""kcat (librdkafka's command-line client), when installed: metadata, produce, consume.

kcat is an optional extra on a developer's machine (``apt-get install kcat``); the project
does not depend on it, so without it this test is skipped.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest

from sluice.testing.broker import BrokerProcess, create_topic
from tests.broker.server.clients import unique

pytestmark = pytest.mark.broker

KCAT = shutil.which("kcat") or shutil.which("kafkacat")


def kcat(broker: BrokerProcess, *args: str, stdin: str | None = None) -> str:
    assert KCAT is not None
    done = subprocess.run(
        [KCAT, "-b", broker.bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (an optional extra)")
def test_kcat_round_trip(broker: BrokerProcess) -> None:
    topic = unique("kcat")
    create_topic(broker.bootstrap, topic, partitions=2)
    listing = kcat(broker, "-L", "-t", topic)
    assert f'topic "{topic}" with 2 partitions' in listing
    assert "leader 0" in listing

    lines = [f"key{i}:value {i}" for i in range(20)]
    kcat(
        broker, "-P", "-t", topic, "-p", "1", "-K", ":", "-z", "lz4", stdin="\n".join(lines) + "\n"
    )
    out = kcat(broker, "-C", "-t", topic, "-p", "1", "-o", "beginning", "-e", "-f", "%o %k=%s\\n")
    assert out.splitlines() == [f"{i} key{i}=value {i}" for i in range(20)]
