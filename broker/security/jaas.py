"""Where a broker's JAAS line comes from: the listener's key, the client's key.

The line itself is parsed by ``sluice.common.jaas`` (Kafka's ``JaasConfig`` grammar, shared
with the ``sluice acls`` command and the Spark source and sink); this module only picks the key
and names it in the error:

* a broker listener reads ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` (both
  names lower case). Kafka's broker ignores a bare ``sasl.jaas.config`` with a warning;
  Sluice falls back to it (issue 19 lists it) and says so through ``JaasSource.key``;
* a client (inter-broker link, Sluice's own clients) reads ``sasl.jaas.config``.

Errors are ``sluice.common.jaas.JaasConfigError`` with the key in front of the parser's
message (a position and a token kind, never the text: a JAAS line holds passwords).

Pure functions and immutable values; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sluice.common.jaas import JaasConfigError, JaasEntry, parse_jaas_config

__all__ = [
    "JaasSource",
    "jaas_config_for_client",
    "jaas_config_for_listener",
]


@dataclass(frozen=True)
class JaasSource:
    """A parsed JAAS entry and the configuration key it came from."""

    key: str
    entry: JaasEntry


def jaas_config_for_listener(
    properties: Mapping[str, str], listener: str, mechanism: str
) -> JaasSource | None:
    """The JAAS entry a broker listener uses for ``mechanism``, or ``None`` if none is set.

    ``listener.name.<listener>.<mechanism>.sasl.jaas.config`` first (Kafka's only broker key),
    then the bare ``sasl.jaas.config`` (a Sluice fallback; Kafka ignores it on brokers).
    """
    keys = (
        f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config",
        "sasl.jaas.config",
    )
    for key in keys:
        text = properties.get(key)
        if text is not None and text.strip():
            return JaasSource(key, _parse_for_key(key, text))
    return None


def jaas_config_for_client(properties: Mapping[str, str]) -> JaasSource | None:
    """The client's ``sasl.jaas.config`` entry, or ``None`` if the key is missing or blank."""
    text = properties.get("sasl.jaas.config")
    if text is None or not text.strip():
        return None
    return JaasSource("sasl.jaas.config", _parse_for_key("sasl.jaas.config", text))


def _parse_for_key(key: str, text: str) -> JaasEntry:
    try:
        return parse_jaas_config(text)
    except JaasConfigError as exc:
        raise JaasConfigError(f"{key}: {exc}") from None
