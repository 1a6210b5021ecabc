"""Tests for sluice.schemas.server: the registry's server keys, and where it says it listens."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from sluice.schemas.server import RegistryConfig, RegistryConfigError, bind_listener
from sluice.testing.net import free_port


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"listeners": "127.0.0.1:8081"}, r"^listeners: expected http://host:port or https://"),
        ({"listeners": "http://h:port"}, r"^listeners: expected http://host:port or https://"),
        ({"log.level": "loud"}, r"^log.level: expected one of critical, .*, found 'loud'$"),
        (
            {"schema.compatibility.level": "SIDEWAYS"},
            r"^schema.compatibility.level: expected one of BACKWARD, .*found 'SIDEWAYS'$",
        ),
    ],
)
def test_bad_server_keys_name_the_key(props: dict[str, str], message: str) -> None:
    with pytest.raises(RegistryConfigError, match=message):
        RegistryConfig.from_properties(props)


def test_defaults_and_case() -> None:
    config = RegistryConfig.from_properties({"log.level": "DEBUG"})
    assert (config.host, config.port, config.log_level) == ("127.0.0.1", 8081, "debug")
    assert config.zookeeper_connect is None and config.data_dir == Path("./data/registry")


def test_an_address_in_use_is_one_error_naming_key_and_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config = RegistryConfig.from_properties({"listeners": f"http://127.0.0.1:{port}"})
        with pytest.raises(RegistryConfigError) as caught:
            bind_listener(config)
    assert str(caught.value) == (
        f"listeners=http://127.0.0.1:{port}: cannot bind 127.0.0.1:{port}: Address already in use"
    )


def _start(tmp_path: Path, port: int) -> subprocess.Popen[str]:
    args = [sys.executable, "-m", "sluice", "registry", "start"]
    for item in (f"listeners=http://127.0.0.1:{port}", f"schema.registry.data.dir={tmp_path}"):
        args += ["--override", item]
    return subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path
    )


def test_a_failed_bind_stops_the_start_before_it_says_it_listens(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        process = _start(tmp_path, port)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 2, output
    assert f"listeners=http://127.0.0.1:{port}: cannot bind 127.0.0.1:{port}" in output
    assert "Address already in use" in output
    assert "listening on" not in output


def test_the_registry_says_where_it_listens_once_it_is_bound(tmp_path: Path) -> None:
    port = free_port()
    process = _start(tmp_path, port)
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:
            seen.append(line)
            if "listening on" in line:
                # Said only after the bind: a connection made the moment it is read succeeds.
                with socket.create_connection(("127.0.0.1", port), timeout=5):
                    pass
                break
        else:
            pytest.fail("the registry never said where it listens:\n" + "".join(seen))
        assert f"listening on http://127.0.0.1:{port}" in seen[-1]
        # The queued connection is served once uvicorn runs (its signal handlers too).
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as response:
            assert response.status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=60)
    assert process.returncode == 0
