"""``NetworkLab``: brokers in Linux network namespaces on a private bridge, so a test can cut
one broker off from its peers and from ZooKeeper — a network partition — and heal it.

Topology (one lab; ``S`` is a /24 under ``10.231.0.0/16`` that no address on this machine
uses yet, picked at :meth:`NetworkLab.open`)::

    root namespace                                     namespace sl<pid>-<tag>-<i>
    ───────────────                                    ─────────────────────────────
    bridge sl<pid>-<tag>b  10.231.S.1/24  (client)     veth0  10.231.S.<10+i>/24   broker i
                           10.231.S.2/32  (ZooKeeper)   lo     127.0.0.1
        └─ port sl<pid>-<tag>v<i> ◀──── veth pair ────▶ veth0

* The test process, in the root namespace, reaches every broker through the bridge from
  10.231.S.1. ZooKeeper listens on 10.231.S.2 only (:class:`LabZooKeeper`), a second address
  on the bridge, so a broker can be cut from ZooKeeper while the test client still reaches it.
* Only addresses this module creates are used, on links it creates; nothing is routed off the
  machine (the namespaces have no default route).
* A broker runs as ``ip netns exec <ns> python -m sluice broker start …`` with ``listeners``
  (hence ``advertised.listeners``) on its namespace address, port 9092 in every namespace
  (:class:`LabBroker`). ``ip netns exec`` execs the command, so the child's pid is the
  broker's: SIGKILL and SIGSTOP reach the broker itself.

Partitions (:meth:`NetworkLab.partition`) drop packets *silently*, as a broken switch does —
no RST, no ICMP — so TCP connections hang until their timeouts, the case Jepsen finds matters.
The kernel of the test VM has no iptables/nftables, no ``netem`` and no ``gact`` action, but it
has ``htb``, the ``u32`` classifier and the ``blackhole`` qdisc: every veth end gets an
``htb`` root whose default class passes traffic and whose class ``1:20`` feeds a ``blackhole``.
A partition adds ``u32`` filters sending to ``1:20``:

* on ``veth0`` inside the namespace (egress, leaving the broker): destination = a cut address;
* on the bridge port in the root namespace (egress, entering the broker): source = a cut
  address.

Both directions are dropped, so the cut is symmetric; :meth:`NetworkLab.heal` deletes the
filters. :meth:`NetworkLab.isolate` instead sets the bridge port down: the broker is cut from
everything, the test client included.

Clean-up: :meth:`NetworkLab.close` (and the context manager, and an ``atexit`` hook) deletes
the namespaces and the bridge — deleting a namespace deletes its veth end and so the pair.
Namespaces and bridges whose name carries the pid of a process that no longer runs (a killed
test run) are swept at the next :meth:`NetworkLab.open` (the pid ends at the ``-``: names are
``sl<pid>-<tag>…``, and a tag's digits must never extend the pid — an earlier version swept a
live lab that way). Every ``ip``/``tc`` command runs with
a timeout (:data:`COMMAND_TIMEOUT`).

Needs root (``CAP_NET_ADMIN``) and iproute2 (Debian's ``iproute2``, installed with the base
system). :func:`netns_missing` says why a lab cannot be built here, for the fixtures to skip
(or, under ``CI=true``, fail).

Not thread-safe: one thread builds, partitions, heals and closes a lab. :func:`call_broker` is
thread-safe (it shares nothing).
"""

from __future__ import annotations

import atexit
import ipaddress
import os
import re
import shutil
import socket
import struct
import subprocess
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from sluice.broker.protocol import ApiKey, decode_response, encode_request
from sluice.broker.protocol.apis import request_type
from sluice.broker.protocol.build import build
from sluice.testing.broker import BrokerProcess
from sluice.testing.cluster import BrokerCluster
from sluice.testing.net import WaitTimeoutError, wait_until
from sluice.testing.zookeeper import ZooKeeperServer

COMMAND_TIMEOUT = 10.0
#: The /16 the labs' /24s are taken from (RFC 1918, unlikely to be routed on a test box).
LAB_SUPERNET = ipaddress.IPv4Network("10.231.0.0/16")
BROKER_PORT = 9092
#: The host part of broker i's address is HOST_BASE + i.
HOST_BASE = 10
_CUT_CLASS = "1:20"
_FILTER_PRIO = "1"
_NAME_PREFIX = "sl"
_SIZE = struct.Struct(">i")


class NetnsUnavailableError(RuntimeError):
    """Network namespaces cannot be built here (not root, no ``ip``, or the kernel refused)."""


class NetnsCommandError(RuntimeError):
    """An ``ip``/``tc`` command failed or did not finish in time (its output in the message)."""


def run_ip(*args: str, namespace: str | None = None, check: bool = True) -> str:
    """Run ``ip``/``tc`` ``args`` (in ``namespace`` when given) with a timeout; its stdout.
    A non-zero exit with ``check`` raises :class:`NetnsCommandError`. Thread-safe."""
    argv = list(args) if namespace is None else ["ip", "netns", "exec", namespace, *args]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise NetnsCommandError(f"{' '.join(argv)}: no answer in {COMMAND_TIMEOUT}s") from exc
    if check and done.returncode != 0:
        raise NetnsCommandError(
            f"{' '.join(argv)}: expected exit 0, found {done.returncode}: {done.stderr.strip()}"
        )
    return done.stdout


def netns_missing() -> str | None:
    """Why a :class:`NetworkLab` cannot be built here, or ``None`` if it can (a namespace and
    a veth pair with the ``htb``/``u32``/``blackhole`` cut are created and deleted)."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "no `ip`/`tc` on PATH (Debian package iproute2)"
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN)"
    name = f"{_NAME_PREFIX}{os.getpid()}-probe"
    try:
        run_ip("ip", "netns", "add", name)
        try:
            run_ip("ip", "link", "add", "probe0", "type", "veth", "peer", "probe1", namespace=name)
            _add_cut_qdiscs("probe0", name)
        finally:
            run_ip("ip", "netns", "del", name, check=False)
    except NetnsCommandError as exc:
        return f"cannot build a network namespace with a cuttable veth: {exc}"
    return None


def _add_cut_qdiscs(device: str, namespace: str | None) -> None:
    """An ``htb`` root on ``device``: class 1:10 (default) passes, class 1:20 drops."""
    run_ip("tc", "qdisc", "add", "dev", device, "root", "handle", "1:", "htb", "default", "10",
           namespace=namespace)  # fmt: skip
    for classid in ("1:10", _CUT_CLASS):
        run_ip("tc", "class", "add", "dev", device, "parent", "1:", "classid", classid, "htb",
               "rate", "10gbit", "quantum", "60000", namespace=namespace)  # fmt: skip
    run_ip("tc", "qdisc", "add", "dev", device, "parent", _CUT_CLASS, "handle", "20:",
           "blackhole", namespace=namespace)  # fmt: skip


def _cut(device: str, namespace: str | None, direction: str, address: str) -> None:
    run_ip("tc", "filter", "add", "dev", device, "parent", "1:", "protocol", "ip", "prio",
           _FILTER_PRIO, "u32", "match", "ip", direction, f"{address}/32", "flowid", _CUT_CLASS,
           namespace=namespace)  # fmt: skip


def _uncut(device: str, namespace: str | None) -> None:
    run_ip("tc", "filter", "del", "dev", device, "parent", "1:", "prio", _FILTER_PRIO,
           namespace=namespace, check=False)  # fmt: skip


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale() -> list[str]:
    """Delete namespaces and bridges left by lab owners that no longer run; their names."""
    swept = []
    owner = re.compile(rf"^{_NAME_PREFIX}(\d+)-")
    names = [line.split()[0] for line in run_ip("ip", "netns", "list").splitlines() if line]
    links = re.findall(
        r"^\d+: ([^:@]+)", run_ip("ip", "-o", "link", "show", "type", "bridge"), re.M
    )
    for kind, name in [("netns", n) for n in names] + [("link", n) for n in links]:
        match = owner.match(name)
        if match and not _pid_alive(int(match.group(1))):
            run_ip("ip", kind, "del", name, check=False)
            swept.append(name)
    return swept


def _free_subnet() -> ipaddress.IPv4Network:
    used = {
        ipaddress.IPv4Interface(a).network
        for a in re.findall(r"inet (\S+)", run_ip("ip", "-4", "-o", "addr", "show"))
    }
    for subnet in LAB_SUPERNET.subnets(new_prefix=24):
        if not any(subnet.overlaps(u) for u in used):
            return subnet
    raise NetnsUnavailableError(f"every /24 of {LAB_SUPERNET} is in use on this machine")


@dataclass
class LabHost:
    """One namespace on the lab's bridge: its name, address and the two veth ends."""

    index: int
    namespace: str
    address: str
    bridge_port: str  # the veth end on the bridge (root namespace)
    inner: str = "veth0"  # the veth end inside the namespace
    cut_from: set[str] = field(default_factory=set)
    isolated: bool = False


class NetworkLab:
    """A bridge and namespaces on a private /24; see the module docstring."""

    def __init__(self) -> None:
        self.tag = uuid.uuid4().hex[:3]
        self.prefix = f"{_NAME_PREFIX}{os.getpid()}-{self.tag}"
        self.bridge = f"{self.prefix}b"
        self.subnet: ipaddress.IPv4Network | None = None
        self.hosts: dict[int, LabHost] = {}
        self._open = False

    # -- addresses ----------------------------------------------------------------------------

    def _host_address(self, offset: int) -> str:
        if self.subnet is None:
            raise NetnsUnavailableError("the lab is not open")
        return str(self.subnet.network_address + offset)

    @property
    def client_address(self) -> str:
        """The test process's address on the bridge (10.231.S.1)."""
        return self._host_address(1)

    @property
    def service_address(self) -> str:
        """A second address on the bridge for services of the root namespace (ZooKeeper)."""
        return self._host_address(2)

    # -- lifecycle ----------------------------------------------------------------------------

    def open(self) -> Self:
        """Sweep stale labs, pick a free /24 and create the bridge with the client and service
        addresses. :class:`NetnsUnavailableError` if namespaces cannot be built here."""
        missing = netns_missing()
        if missing is not None:
            raise NetnsUnavailableError(missing)
        sweep_stale()
        self.subnet = _free_subnet()
        self._open = True
        atexit.register(self.close)
        try:
            run_ip("ip", "link", "add", self.bridge, "type", "bridge")
            run_ip("ip", "addr", "add", f"{self.client_address}/24", "dev", self.bridge)
            run_ip("ip", "addr", "add", f"{self.service_address}/32", "dev", self.bridge)
            run_ip("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        return self

    def add_host(self) -> LabHost:
        """A new namespace with ``veth0`` on the bridge at 10.231.S.<10+i>, loopback up and the
        cut qdiscs on both veth ends."""
        index = len(self.hosts)
        host = LabHost(
            index=index,
            namespace=f"{self.prefix}-{index}",
            address=self._host_address(HOST_BASE + index),
            bridge_port=f"{self.prefix}v{index}",
        )
        self.hosts[index] = host
        ns = host.namespace
        run_ip("ip", "netns", "add", ns)
        run_ip("ip", "link", "add", host.bridge_port, "type", "veth", "peer", host.inner,
               "netns", ns)  # fmt: skip
        run_ip("ip", "link", "set", host.bridge_port, "master", self.bridge, "up")
        run_ip("ip", "addr", "add", f"{host.address}/24", "dev", host.inner, namespace=ns)
        run_ip("ip", "link", "set", host.inner, "up", namespace=ns)
        run_ip("ip", "link", "set", "lo", "up", namespace=ns)
        _add_cut_qdiscs(host.inner, ns)
        _add_cut_qdiscs(host.bridge_port, None)
        return host

    def close(self) -> None:
        """Delete every namespace and the bridge. Idempotent; processes still running in a
        namespace keep running (stop them first) but lose their network."""
        if not self._open:
            return
        self._open = False
        for host in self.hosts.values():
            run_ip("ip", "netns", "del", host.namespace, check=False)
        run_ip("ip", "link", "del", self.bridge, check=False)
        atexit.unregister(self.close)

    def __enter__(self) -> Self:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- faults -------------------------------------------------------------------------------

    def partition(self, index: int, addresses: Iterable[str]) -> None:
        """Drop every packet between host ``index`` and each of ``addresses`` (peers' or the
        service address), both ways, silently. Adds to an existing partition."""
        host = self.hosts[index]
        for address in addresses:
            if address in host.cut_from:
                continue
            _cut(host.inner, host.namespace, "dst", address)
            _cut(host.bridge_port, None, "src", address)
            host.cut_from.add(address)

    def partition_from_cluster(self, index: int) -> None:
        """Cut host ``index`` from every other host and from the service address (ZooKeeper);
        the test client (10.231.S.1) still reaches it."""
        others = [h.address for i, h in self.hosts.items() if i != index]
        self.partition(index, [*others, self.service_address])

    def isolate(self, index: int) -> None:
        """Cut host ``index`` from everything, the test client included (bridge port down)."""
        host = self.hosts[index]
        run_ip("ip", "link", "set", host.bridge_port, "down")
        host.isolated = True

    def heal(self, index: int | None = None) -> None:
        """Undo :meth:`partition` and :meth:`isolate` for host ``index`` (every host if None)."""
        for host in self.hosts.values() if index is None else [self.hosts[index]]:
            if host.cut_from:
                _uncut(host.inner, host.namespace)
                _uncut(host.bridge_port, None)
                host.cut_from.clear()
            if host.isolated:
                run_ip("ip", "link", "set", host.bridge_port, "up")
                host.isolated = False


# -- processes in the lab -------------------------------------------------------------------


def call_broker(address: str, port: int, body: Any, timeout: float) -> Any | None:
    """Send one kio request to ``address:port`` and return the decoded response, or None if
    the connection fails, closes or gives no answer within ``timeout`` seconds (connect, send,
    read each). Bypasses client metadata: it asks exactly that broker. Thread-safe."""
    try:
        with socket.create_connection((address, port), timeout=timeout) as sock:
            sock.sendall(encode_request(1, "sluice-netns", body))
            prefix = _recv_exactly(sock, _SIZE.size)
            frame = None if prefix is None else _recv_exactly(sock, _SIZE.unpack(prefix)[0])
    except OSError:
        return None
    if frame is None:
        return None
    correlation_id, response = decode_response(frame, int(body.__api_key__), body.__version__)
    return response if correlation_id == 1 else None


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = sock.recv(n)
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class LabBroker(BrokerProcess):
    """A :class:`~sluice.testing.broker.BrokerProcess` run inside ``host``'s namespace,
    listening (and advertised) on ``host.address:9092``."""

    def __init__(
        self, host: LabHost, base_dir: Path, overrides: Mapping[str, str] | None = None, **kw: Any
    ) -> None:
        self.host = host
        settings = {"listeners": f"PLAINTEXT://{host.address}:{BROKER_PORT}", **(overrides or {})}
        super().__init__(base_dir, settings, port=BROKER_PORT, **kw)

    @property
    def bootstrap(self) -> str:
        return f"{self.host.address}:{self.port}"

    def command(self) -> list[str]:
        return ["ip", "netns", "exec", self.host.namespace, *super().command()]

    def answers(self, timeout: float = 2.0) -> bool:
        body = build(request_type(ApiKey.API_VERSIONS, 0), {})
        response = call_broker(self.host.address, self.port, body, timeout)
        return response is not None and int(response.error_code) == 0 and bool(response.api_keys)


@dataclass(frozen=True)
class PartitionView:
    """One partition as one broker's Metadata answer shows it."""

    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def partition_view(
    broker: LabBroker, topic: str, partition: int, timeout: float = 3.0
) -> PartitionView | None:
    """``topic``-``partition`` as ``broker`` itself answers Metadata (v8, by hand): clients'
    metadata calls go to whichever broker they pick, and a partitioned broker's view is stale —
    this asks exactly one. None if no answer, no such partition, or an error code."""
    body = build(
        request_type(ApiKey.METADATA, 8),
        {
            "topics": [{"name": topic}],
            "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
    )
    response = call_broker(broker.host.address, broker.port, body, timeout)
    if response is None:
        return None
    for t in response.topics:
        if t.name != topic or int(t.error_code) != 0:
            continue
        for p in t.partitions:
            if int(p.partition_index) == partition and int(p.error_code) == 0:
                return PartitionView(
                    leader=int(p.leader_id),
                    leader_epoch=int(p.leader_epoch),
                    replicas=tuple(int(r) for r in p.replica_nodes),
                    isr=tuple(int(r) for r in p.isr_nodes),
                )
    return None


class LabZooKeeper(ZooKeeperServer):
    """A :class:`~sluice.testing.zookeeper.ZooKeeperServer` in the root namespace listening on
    the lab's service address only (brokers reach it over their veth; partitions cut it)."""

    def __init__(self, lab: NetworkLab, base_dir: Path, **kw: Any) -> None:
        self.address = lab.service_address
        super().__init__(base_dir, **kw)

    @property
    def connect_string(self) -> str:
        return f"{self.address}:{self.port}"

    def _write_config(self) -> None:
        super()._write_config()
        text = self.config_path.read_text(encoding="utf-8")
        text = text.replace("clientPortAddress=127.0.0.1", f"clientPortAddress={self.address}")
        self.config_path.write_text(text, encoding="utf-8")

    def srvr(self, timeout: float = 1.0) -> str:
        with socket.create_connection((self.address, self.port), timeout=timeout) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", errors="replace")


class LabCluster(BrokerCluster):
    """A :class:`~sluice.testing.cluster.BrokerCluster` whose broker ``i`` runs in the lab's
    host ``i`` (created here); every method of the base class works unchanged."""

    def __init__(
        self,
        lab: NetworkLab,
        base_dir: Path,
        zk_connect: str,
        size: int = 3,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(base_dir, zk_connect, size, overrides)
        self.lab = lab
        settings = {**self.brokers[0].overrides}  # the base class's settings, id aside
        settings.pop("broker.id", None)
        self.brokers = {
            i: LabBroker(lab.add_host(), Path(base_dir) / f"broker-{i}", settings, broker_id=i)
            for i in range(size)
        }

    def cut(self, broker_id: int) -> None:
        """Cut broker ``broker_id`` from the other brokers and from ZooKeeper."""
        self.lab.partition_from_cluster(self.brokers_host(broker_id).index)

    def heal(self, broker_id: int | None = None) -> None:
        self.lab.heal(None if broker_id is None else self.brokers_host(broker_id).index)

    def brokers_host(self, broker_id: int) -> LabHost:
        return self.lab_broker(broker_id).host

    def lab_broker(self, broker_id: int) -> LabBroker:
        broker = self.brokers[broker_id]
        assert isinstance(broker, LabBroker)
        return broker

    def view(self, broker_id: int, topic: str, partition: int) -> PartitionView | None:
        """:func:`partition_view` of broker ``broker_id``."""
        return partition_view(self.lab_broker(broker_id), topic, partition)

    def wait_views(
        self,
        brokers: Iterable[int],
        topic: str,
        partition: int,
        predicate: Callable[[PartitionView], bool],
        timeout: float,
        message: str,
    ) -> None:
        """Poll until each of ``brokers`` answers Metadata for the partition satisfying
        ``predicate`` (``WaitTimeoutError`` naming ``message`` and the views last seen)."""
        ids = sorted(brokers)
        seen: dict[int, PartitionView | None] = {}

        def holds() -> bool:
            for i in ids:
                seen[i] = self.view(i, topic, partition)
            return all(v is not None and predicate(v) for v in seen.values())

        try:
            wait_until(
                holds, timeout, f"{topic}-{partition} on brokers {ids}: {message}", interval=0.1
            )
        except WaitTimeoutError as exc:
            raise WaitTimeoutError(f"{exc}; last views {seen}") from None
