"""``ConnectionLimits``: which connections a broker admits, and which it closes as idle.

Kafka's rules, with its keys (see ``sluice.broker.config``):

* ``max.connections``: a connection accepted while ``max.connections`` are open is closed at
  once (Kafka's acceptor does the same for a per-listener or broker-wide limit); nothing is
  read from it.
* ``max.connections.per.ip`` and ``max.connections.per.ip.overrides``: the same, counted per
  client address; an override (a host name is resolved once, at startup, to every address
  it has) replaces the default for that address, and 0 refuses the address entirely.
* ``connections.max.idle.ms``: a connection that has waited that long for bytes — idle, or
  stopped halfway through a request (a partial frame holds the connection as surely as an
  idle one) — is closed. A connection busy with a request (a long-poll fetch, an acks=all
  produce) is not idle: the clock starts when the broker goes back to reading.
  -1 disables it.

Refusals are logged once per burst, per reason and address: the first refusal logs a warning,
the rest of the burst are only counted, and the next connection admitted from that address
(or, for the total limit, from anywhere) logs one line with the count — a client in a
reconnect loop cannot flood the log.

Sans-IO: this module holds counts and clocks; the acceptor (``sluice.broker.server.acceptor``)
closes the sockets. Not thread-safe: used on the broker's event loop only.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping
from dataclasses import dataclass

log = logging.getLogger(__name__)

# What the idle check's period is, as a fraction of connections.max.idle.ms, and its bounds:
# a connection is closed at most a period after it turned idle.
IDLE_CHECK_FRACTION = 0.1
IDLE_CHECK_MIN_S = 0.05
IDLE_CHECK_MAX_S = 5.0

_TOTAL = "*"  # the refusal-burst key of the total limit


class UnresolvableOverrideError(ValueError):
    """A host of ``max.connections.per.ip.overrides`` has no address."""


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """Address → limit for ``max.connections.per.ip.overrides``: addresses as given (in
    canonical form), host names resolved to every address they have. Raises
    :class:`UnresolvableOverrideError` naming the key and the host."""
    resolved: dict[str, int] = {}
    for host, limit in overrides.items():
        try:
            resolved[str(ipaddress.ip_address(host))] = limit
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            raise UnresolvableOverrideError(
                f"max.connections.per.ip.overrides: expected a resolvable host, found {host!r} "
                f"({exc})"
            ) from None
        for info in infos:
            resolved[str(ipaddress.ip_address(info[4][0]))] = limit
    return resolved


@dataclass(eq=False)
class ConnectionSlot:
    """One admitted connection. ``waiting_since`` is the monotonic time the broker started
    waiting for its bytes (None while it handles a request)."""

    address: str
    waiting_since: float | None = None


class ConnectionLimits:
    """The open connections' counts and the refusal bursts; see the module docstring."""

    def __init__(
        self,
        *,
        max_connections: int,
        max_per_ip: int,
        per_ip_overrides: Mapping[str, int],
        max_idle_ms: int,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.per_ip_overrides = {_canonical(a): n for a, n in per_ip_overrides.items()}
        self.max_idle_s = max_idle_ms / 1000 if max_idle_ms > 0 else None
        self.open: set[ConnectionSlot] = set()
        self._per_ip: dict[str, int] = {}
        # Refusal bursts in progress: key (an address, or _TOTAL) → connections refused.
        self._refused: dict[str, int] = {}

    @property
    def idle_check_interval(self) -> float | None:
        """How often :meth:`idle` should be asked (seconds); None if nothing ever idles."""
        if self.max_idle_s is None:
            return None
        return min(max(self.max_idle_s * IDLE_CHECK_FRACTION, IDLE_CHECK_MIN_S), IDLE_CHECK_MAX_S)

    def limit_for(self, address: str) -> int:
        return self.per_ip_overrides.get(address, self.max_per_ip)

    def admit(self, address: str) -> ConnectionSlot | None:
        """A slot for a new connection from ``address``, or None if a limit refuses it (the
        caller closes it). Logs the first refusal of a burst and the end of a burst."""
        address = _canonical(address)
        if len(self.open) >= self.max_connections:
            self._refuse(_TOTAL, f"max.connections={self.max_connections} are open")
            return None
        limit = self.limit_for(address)
        if self._per_ip.get(address, 0) >= limit:
            key = "max.connections.per.ip" + (
                ".overrides" if address in self.per_ip_overrides else ""
            )
            self._refuse(address, f"{key} allows {limit} from {address}")
            return None
        self._end_burst(address, f"from {address}")
        self._end_burst(_TOTAL, "(max.connections)")
        slot = ConnectionSlot(address)
        self.open.add(slot)
        self._per_ip[address] = self._per_ip.get(address, 0) + 1
        return slot

    def release(self, slot: ConnectionSlot) -> None:
        """The connection of ``slot`` closed. Idempotent."""
        if slot not in self.open:
            return
        self.open.discard(slot)
        left = self._per_ip[slot.address] - 1
        if left:
            self._per_ip[slot.address] = left
        else:
            del self._per_ip[slot.address]

    def idle(self, now: float) -> list[ConnectionSlot]:
        """The connections that have waited for bytes longer than ``connections.max.idle.ms``
        at monotonic time ``now``."""
        if self.max_idle_s is None:
            return []
        cutoff = now - self.max_idle_s
        return [
            slot
            for slot in self.open
            if slot.waiting_since is not None and slot.waiting_since <= cutoff
        ]

    def _refuse(self, key: str, reason: str) -> None:
        refused = self._refused.get(key, 0)
        if refused == 0:
            log.warning(
                "refusing new connections: %s (further refusals are counted, not logged)", reason
            )
        self._refused[key] = refused + 1

    def _end_burst(self, key: str, what: str) -> None:
        refused = self._refused.pop(key, 0)
        if refused:
            log.info("accepting connections %s again after refusing %d", what, refused)


def _canonical(address: str) -> str:
    """``::ffff:127.0.0.1`` → ``127.0.0.1``, so one client counts once whichever socket
    family accepted it; anything that is no address stays as it is."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return str(parsed.ipv4_mapped)
    return str(parsed)
