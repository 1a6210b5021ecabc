"""The broker's side of TLS: a listener's ``ssl.*`` keys, and the principal of a TLS peer.

The keys themselves become an ``ssl.SSLContext`` in ``sluice.common.tls`` (shared with the
schema registry and Sluice's clients); what is the broker's own is:

* **per-listener keys** (:func:`listener_properties`): Kafka's ``valuesWithPrefixOverride`` —
  ``listener.name.<listener>.<key>`` (listener name lower case) wins over ``<key>`` for every
  ``ssl.*`` and ``sasl.*`` key, so one broker can serve two TLS listeners with different
  keystores or client-authentication rules;
* **the principal** (:func:`peer_principal`), Kafka's default
  (``ssl.principal.mapping.rules=DEFAULT``): ``User:`` and the client certificate's subject as
  ``X500Principal.getName()`` writes it (``sluice.common.tls.certificate_subject``), or
  ``User:ANONYMOUS`` when the peer sent none (``ssl.client.auth=none`` or ``requested``).

Pure functions; thread-safe.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Final

from sluice.common.tls import certificate_subject, server_context

__all__ = ["ANONYMOUS", "listener_properties", "listener_server_context", "peer_principal"]

ANONYMOUS: Final = "User:ANONYMOUS"


def listener_properties(properties: Mapping[str, str], listener: str) -> dict[str, str]:
    """``properties`` with ``listener.name.<listener>.`` keys laid over the bare ones (the
    prefix removed), as Kafka's ``AbstractConfig.valuesWithPrefixOverride`` does."""
    prefix = f"listener.name.{listener.lower()}."
    merged = dict(properties)
    for key, value in properties.items():
        if key.startswith(prefix):
            merged[key[len(prefix) :]] = value
    return merged


def listener_server_context(properties: Mapping[str, str], listener: str) -> ssl.SSLContext:
    """The ``SSLContext`` of the listener named ``listener`` (``SSL`` or ``SASL_SSL``
    protocol), from its overrides and the broker's ``ssl.*`` keys. Raises
    ``sluice.common.tls.TlsConfigError`` / ``KeystoreError``, naming the listener."""
    return server_context(
        listener_properties(properties, listener), listener=f"the listener {listener}"
    )


def peer_principal(connection: ssl.SSLObject | ssl.SSLSocket) -> str:
    """Kafka's principal for the peer of a completed handshake (see the module docstring)."""
    der = connection.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return f"User:{certificate_subject(der)}"
