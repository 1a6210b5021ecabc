"""Fixtures shared by the whole suite: a real ZooKeeper, and a private chroot in it per test.

* ``zookeeper`` (session): a started :class:`~sluice.testing.zookeeper.ZooKeeperServer`;
  stopped at session end. A test may ``kill()``/``restart()`` it; the next test that asks for a
  chroot gets it started again if it was left down.
* ``zk_chroot`` (function): a fresh, existing znode path such as ``/sluice-test-1f2e…``.
* ``zk_connect`` (function): ``"127.0.0.1:<port>/sluice-test-1f2e…"`` — a connect string with
  that chroot, for brokers, registries and consumers under test.
* ``zk_client`` (function): a started kazoo client on ``zk_connect``; stopped and closed after
  the test.

Without Java or Debian's ``zookeeper`` package these fixtures skip the test — except under
``CI=true``, where a missing dependency is a failure (``make system-deps`` installs it).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from sluice.testing.ci import in_ci
from sluice.testing.zookeeper import (
    ZooKeeperServer,
    kazoo_client,
    new_chroot,
    zookeeper_missing,
)


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    missing = zookeeper_missing()
    if missing is not None:
        message = f"ZooKeeper is needed but {missing}; `make system-deps` installs it"
        if in_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def zk_chroot(zookeeper: ZooKeeperServer) -> str:
    return new_chroot(zookeeper)


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer, zk_chroot: str) -> str:
    return zookeeper.connect_string + zk_chroot


@pytest.fixture
def zk_client(zk_connect: str) -> Iterator[KazooClient]:
    client = kazoo_client(zk_connect)
    try:
        yield client
    finally:
        client.stop()
        client.close()
