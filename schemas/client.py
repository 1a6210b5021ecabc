"""A small synchronous client for the registry's REST API (ours or Confluent's).

Standard library only (``urllib``), so the serde works wherever Sluice's client side runs
(Spark executors included) without extra packages. Failed calls raise the typed error of the
Confluent ``error_code`` in the response (see :mod:`sluice.schemas.errors`); an unreachable registry
raises :class:`~sluice.schemas.errors.RegistryConnectionError`.

Security: ``https://`` URLs are checked against the system's CAs, or the ``ssl_context``
given; ``basic_auth=(user, password)`` (or ``user:password@`` in the URL, Confluent's ``URL``
credentials source) is sent with every request, preemptively, as confluent-kafka does, and
never on a redirect. :meth:`RegistryClient.from_config` reads Confluent's client keys
(``basic.auth.credentials.source``, ``basic.auth.user.info``, ``ssl.ca.location``, ...; see
:mod:`sluice.schemas.client_config`). :attr:`RegistryClient.url` never holds credentials, so
errors quoting it are safe to log.

The client does not cache; :mod:`sluice.schemas.serde` caches what it needs. ``requests_sent``
counts
HTTP requests made, so callers (and tests) can check how often the registry is asked.
Thread-safe: each call opens its own connection.
"""

from __future__ import annotations

import base64
import json
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any

from sluice.schemas.client_config import RegistryClientConfig
from sluice.schemas.errors import RegistryConnectionError, UnexpectedResponseError, error_for_code

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def _quote(value: str | int) -> str:
    return urllib.parse.quote(str(value), safe="")


class RegistryClient:
    """Client for the registry at ``url`` (e.g. ``http://127.0.0.1:8081``)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float = 10.0,
        basic_auth: tuple[str, str] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        config = RegistryClientConfig.from_url(url, basic_auth, ssl_context)
        self.url = config.url
        self.timeout = timeout
        self.requests_sent = 0
        self._count_lock = threading.Lock()
        self._ssl_context = config.ssl_context
        self._authorization: str | None = None
        if config.basic_auth is not None:
            token = base64.b64encode(":".join(config.basic_auth).encode("utf-8")).decode("ascii")
            self._authorization = f"Basic {token}"

    @classmethod
    def from_config(cls, conf: Mapping[str, str], *, timeout: float = 10.0) -> RegistryClient:
        """A client from Confluent's client keys, bare (``url``, ``basic.auth.user.info``,
        ``ssl.ca.location``, as ``SchemaRegistryClient`` takes them) or with the
        ``schema.registry.`` prefix of the serdes; see :mod:`sluice.schemas.client_config`."""
        config = RegistryClientConfig.from_config(conf)
        return cls(
            config.url,
            timeout=timeout,
            basic_auth=config.basic_auth,
            ssl_context=config.ssl_context,
        )

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Nothing to release (connections are per call); kept for symmetry with Confluent."""

    # -- transport ---------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        query: dict[str, str] | None = None,
    ) -> Any:
        """Send one request; return the decoded JSON response or raise a typed error."""
        url = self.url + path
        if query:
            url += "?" + urllib.parse.urlencode(query)
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": f"{CONTENT_TYPE}, application/json"}
        if data is not None:
            headers["Content-Type"] = CONTENT_TYPE
        req = urllib.request.Request(url, data=data, method=method, headers=headers)
        if self._authorization is not None:
            req.add_unredirected_header("Authorization", self._authorization)
        with self._count_lock:
            self.requests_sent += 1
        try:
            with urllib.request.urlopen(
                req, timeout=self.timeout, context=self._ssl_context
            ) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            with e:
                raise self._error(e.code, e.read()) from None
        except (urllib.error.URLError, OSError) as e:
            raise RegistryConnectionError(f"cannot reach registry at {self.url}: {e}") from e
        return json.loads(raw) if raw else None

    @staticmethod
    def _error(status: int, raw: bytes) -> Exception:
        try:
            body = json.loads(raw)
            return error_for_code(int(body["error_code"]), str(body["message"]), status)
        except (ValueError, KeyError, TypeError):
            text = raw[:200].decode("utf-8", "replace")
            err = UnexpectedResponseError(
                f"expected a registry error body, found HTTP {status}: {text!r}"
            )
            err.http_status = status
            return err

    # -- operations --------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        schema: str,
        *,
        schema_type: str | None = None,
        references: list[dict[str, Any]] | None = None,
    ) -> int:
        """Register ``schema`` under ``subject``; return its id. ``schema_type`` is AVRO
        (the default), JSON or PROTOBUF; ``references`` are ``{name, subject, version}``."""
        request: dict[str, Any] = {"schema": schema}
        if schema_type is not None:
            request["schemaType"] = schema_type
        if references:
            request["references"] = references
        body = self.request("POST", f"/subjects/{_quote(subject)}/versions", request)
        return int(body["id"])

    def lookup(self, subject: str, schema: str) -> dict[str, Any]:
        """``{"subject", "id", "version", "schema"}`` of ``schema`` under ``subject``."""
        return self.request("POST", f"/subjects/{_quote(subject)}", {"schema": schema})  # type: ignore[no-any-return]

    def get_schema(self, schema_id: int) -> str:
        """The schema text registered under ``schema_id``."""
        return str(self.request("GET", f"/schemas/ids/{int(schema_id)}")["schema"])

    def subjects(self, *, deleted: bool = False) -> list[str]:
        query = {"deleted": "true"} if deleted else None
        return list(self.request("GET", "/subjects", query=query))

    def versions(self, subject: str) -> list[int]:
        return list(self.request("GET", f"/subjects/{_quote(subject)}/versions"))

    def get_version(self, subject: str, version: int | str = "latest") -> dict[str, Any]:
        path = f"/subjects/{_quote(subject)}/versions/{_quote(version)}"
        return self.request("GET", path)  # type: ignore[no-any-return]

    def delete_subject(self, subject: str, *, permanent: bool = False) -> list[int]:
        query = {"permanent": "true"} if permanent else None
        return list(self.request("DELETE", f"/subjects/{_quote(subject)}", query=query))

    def delete_version(self, subject: str, version: int | str, *, permanent: bool = False) -> int:
        query = {"permanent": "true"} if permanent else None
        path = f"/subjects/{_quote(subject)}/versions/{_quote(version)}"
        return int(self.request("DELETE", path, query=query))

    def test_compatibility(
        self, subject: str, schema: str, version: int | str = "latest"
    ) -> tuple[bool, list[str]]:
        """``(is_compatible, messages)`` of ``schema`` against ``version`` of ``subject``."""
        path = f"/compatibility/subjects/{_quote(subject)}/versions/{_quote(version)}"
        body = self.request("POST", path, {"schema": schema}, {"verbose": "true"})
        return bool(body["is_compatible"]), list(body.get("messages", []))

    def get_compatibility(self, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_quote(subject)}"
        return str(self.request("GET", path)["compatibilityLevel"])

    def set_compatibility(self, level: str, subject: str | None = None) -> str:
        path = "/config" if subject is None else f"/config/{_quote(subject)}"
        return str(self.request("PUT", path, {"compatibility": level})["compatibility"])

    def get_mode(self, subject: str | None = None) -> str:
        """The global mode, or ``subject``'s own or else the global one."""
        if subject is None:
            return str(self.request("GET", "/mode")["mode"])
        path = f"/mode/{_quote(subject)}"
        return str(self.request("GET", path, query={"defaultToGlobal": "true"})["mode"])

    def set_mode(self, mode: str, subject: str | None = None, *, force: bool = False) -> str:
        """Set the global mode, or ``subject``'s; ``force`` allows IMPORT over existing
        subjects."""
        path = "/mode" if subject is None else f"/mode/{_quote(subject)}"
        query = {"force": "true"} if force else None
        return str(self.request("PUT", path, {"mode": mode}, query)["mode"])
