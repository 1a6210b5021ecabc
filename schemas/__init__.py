"""Sluice's Avro schema registry (Confluent REST API subset) and the Confluent wire-format serde.

Modules: ``app`` (HTTP routes), ``registry`` (the rules), ``compatibility`` (levels over
``avro.compatibility``), ``avro_schema`` (parsing, identity), ``store`` (the storage contract),
``file_store`` (standalone storage), ``zk_store`` (cluster storage), ``server`` (config +
uvicorn), ``limits`` (request limits and their keys), ``request_body`` (the body-size
middleware), ``json_text`` (JSON decoding bounded in depth), ``tls`` (server and client TLS
contexts from ``ssl.*`` keys), ``basic_auth`` (HTTP Basic authentication: keys and middleware),
``jaas_file`` (JAAS login configuration), ``user_store`` (Jetty's users file), ``client``
(REST client), ``client_config`` (Confluent's client keys: URL, credentials, TLS), ``serde``
(wire format), ``errors``.
Schemas of the pipeline's events: ``page_view.avsc``, ``audit_count.avsc``.
"""

from pathlib import Path

SCHEMA_DIR = Path(__file__).parent


def schema_path(name: str) -> Path:
    """Path of a bundled ``.avsc`` file, e.g. ``schema_path("page_view")``."""
    return SCHEMA_DIR / f"{name}.avsc"
