"""Sluice's schema registry (Confluent's REST API: Avro, JSON Schema and Protobuf) and the
Confluent wire-format serde.

Modules: ``app`` (the application: middleware, error answers), ``routes`` (the HTTP handlers),
``registry`` (the rules), ``schema_request`` (a request's schema, checked), ``mode``
(READWRITE, READONLY, IMPORT), ``context`` (``:.ctx:subject`` and per-context ids),
``compatibility`` (levels, and which versions a change is checked
against), ``schema_type`` (the seam every schema type fits), ``schema_parser`` (type → parser),
``avro_schema``, ``json_schema`` with ``json_schema_diff`` and ``json_schema_difference``,
``protobuf_schema`` with ``protobuf_schema_diff`` (parsing, identity and compatibility of each
type), ``store`` (the storage contract), ``file_store`` (standalone storage), ``zk_store``
(cluster storage), ``server`` (config + uvicorn), ``limits`` (request limits and their keys),
``request_body`` (the body-size middleware), ``json_text`` (JSON decoding bounded in depth),
``tls`` (server and client TLS contexts from ``ssl.*`` keys), ``basic_auth`` (HTTP Basic
authentication: keys and middleware), ``jaas_file`` (JAAS login configuration), ``user_store``
(Jetty's users file), ``client`` (REST client), ``client_config`` (Confluent's client keys: URL,
credentials, TLS), ``serde`` (wire format), ``errors``.
Schemas of the pipeline's events: ``page_view.avsc``, ``audit_count.avsc``.
"""

from pathlib import Path

SCHEMA_DIR = Path(__file__).parent


def schema_path(name: str) -> Path:
    """Path of a bundled ``.avsc`` file, e.g. ``schema_path("page_view")``."""
    return SCHEMA_DIR / f"{name}.avsc"
