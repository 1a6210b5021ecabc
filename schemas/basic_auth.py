"""HTTP Basic authentication of every request, configured as Confluent's registry is.

The keys are Confluent's rest-utils names, declared once in :data:`CONFIG_DEF` (the
registry's "basic authentication" keys in ``docs/configuration.md`` are generated from it):
``authentication.method`` (``NONE``, the default, or ``BASIC``; ``BEARER`` is refused),
``authentication.realm`` (the JAAS entry, and the realm of the 401), ``authentication.roles``,
``authentication.skip.paths`` and ``java.security.auth.login.config`` (the JAAS file).

Confluent takes the JAAS file from the JVM's ``-Djava.security.auth.login.config=F``; Sluice
reads the same name as a key, and, when the key is unset, from that ``-D`` option in the
``SCHEMA_REGISTRY_OPTS`` environment variable, where Confluent's start script reads it. The
entry named ``authentication.realm`` must hold exactly one module, Jetty's
``PropertyFileLoginModule`` (``org.eclipse.jetty.jaas.spi.`` or
``org.eclipse.jetty.security.jaas.spi.``), with ``file=`` naming the users file
(:mod:`sluice.schemas.user_store`). Any other module (LDAP, JDBC, Kerberos) is refused at
start-up. ``debug``, ``hotReload`` and ``refreshInterval`` are accepted and ignored: the users
file is read once, at start-up.

Per request (the middleware is outermost, so nothing else runs first and no body is read
before the check):

* path in ``authentication.skip.paths`` (exact, or ``/prefix/*``): served as is;
* no ``Authorization: Basic …``, undecodable, unknown user or wrong password: ``401`` with
  ``WWW-Authenticate: Basic realm="<realm>"`` and ``{"error_code": 401, "message":
  "Unauthorized"}`` — which of these it was is not told to the client;
* the user holds none of ``authentication.roles``: ``403``, ``{"error_code": 403, ...}``;
* otherwise the request goes on, with the user name in ``scope["user_name"]``.

Failed attempts are logged with the client's address and the reason class, never the user
name (people type passwords there) nor anything from the header. Credentials are decoded as
UTF-8 (RFC 7617's ``charset``), Latin-1 when they are not UTF-8.

:class:`BasicAuthenticator` is immutable after construction; thread-safe.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from sluice.common.config_def import Check, ConfigDef, Type
from sluice.common.options import text
from sluice.schemas.errors import ForbiddenError, RegistrySecurityConfigError, UnauthorizedError
from sluice.schemas.jaas_file import JaasFile
from sluice.schemas.user_store import User, UserStore

METHOD_KEY = "authentication.method"
REALM_KEY = "authentication.realm"
ROLES_KEY = "authentication.roles"
SKIP_PATHS_KEY = "authentication.skip.paths"
JAAS_KEY = "java.security.auth.login.config"
JAAS_ENV = "SCHEMA_REGISTRY_OPTS"

PROPERTY_FILE_MODULES = frozenset(
    {
        "org.eclipse.jetty.jaas.spi.PropertyFileLoginModule",
        "org.eclipse.jetty.security.jaas.spi.PropertyFileLoginModule",
    }
)
ANY_ROLE = frozenset({"*", "**"})

log = logging.getLogger(__name__)


def _check_method(method: str) -> str | None:
    if method.upper() == "BEARER":
        return "BEARER (OAuth) is not supported by Sluice's registry; expected NONE or BASIC"
    if method.upper() not in ("NONE", "BASIC"):
        return f"expected NONE or BASIC, found {method!r}"
    return None


CONFIG_DEF = (
    ConfigDef(error=RegistrySecurityConfigError, what="registry configuration")
    .define(
        METHOD_KEY, Type.STRING, "NONE", Check("NONE, BASIC", _check_method),
        doc="`BASIC`: HTTP Basic authentication of every route (`BEARER` is refused).",
    )
    .define(
        REALM_KEY, Type.STRING, None, default_doc="(required with BASIC)",
        doc="The JAAS entry naming the users file, and the realm of a 401.",
    )
    .define(
        ROLES_KEY, Type.LIST, ("*",),
        doc="Roles allowed in, comma-separated; `*` (or `**`): any user.",
    )
    .define(
        SKIP_PATHS_KEY, Type.LIST, (),
        doc="Paths served without credentials: exact, or `/prefix/*`.",
    )
    .define(
        JAAS_KEY, Type.STRING, None, default_doc=f"`-D{JAAS_KEY}=` in `{JAAS_ENV}`",
        doc="The JAAS file (Confluent reads it from the JVM's -D option).",
    )
)  # fmt: skip


@dataclass(frozen=True)
class BasicAuthenticator:
    """Who may use the registry: ``users``, restricted to ``roles`` (empty: any user)."""

    realm: str
    users: UserStore
    roles: frozenset[str] = frozenset()
    skip_paths: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_realm(self.realm)

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], environ: Mapping[str, str] | None = None
    ) -> BasicAuthenticator | None:
        """The authenticator the keys ask for, or ``None`` with ``authentication.method=NONE``.

        Reads the JAAS file and the users file; raises
        :class:`~sluice.schemas.errors.RegistrySecurityConfigError` (or its ``UsersFileError``).
        """
        values = CONFIG_DEF.parse(props)
        if values[METHOD_KEY].upper() == "NONE":
            return None
        realm = values[REALM_KEY]
        if realm is None:
            raise RegistrySecurityConfigError(
                f"{METHOD_KEY}=BASIC needs {REALM_KEY}: the name of the JAAS entry that lists "
                "the users file"
            )
        _check_realm(realm)
        jaas = JaasFile.read(_jaas_path(props, os.environ if environ is None else environ))
        roles = frozenset(values[ROLES_KEY]) or frozenset({"*"})
        return cls(
            realm=realm,
            users=UserStore.read(_users_file(jaas, realm)),
            roles=frozenset() if roles & ANY_ROLE else roles,
            skip_paths=values[SKIP_PATHS_KEY],
        )

    def skips(self, path: str) -> bool:
        """Whether ``path`` is served without credentials."""
        for spec in self.skip_paths:
            if spec.endswith("/*"):
                if path == spec[:-2] or path.startswith(spec[:-1]):
                    return True
            elif path == spec:
                return True
        return False

    def authenticate(self, authorization: str | None) -> User:
        """The user of an ``Authorization`` header value; raise 401 or 403 errors otherwise
        (the 401 message is the same whatever went wrong)."""
        if authorization is None:
            raise UnauthorizedError("Unauthorized")
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            raise UnauthorizedError("Unauthorized")
        try:
            raw = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise UnauthorizedError("Unauthorized") from None
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            decoded = raw.decode("latin-1")
        name, colon, password = decoded.partition(":")
        user = self.users.authenticate(name, password) if colon else None
        if user is None:
            raise UnauthorizedError("Unauthorized")
        if self.roles and not (user.roles & self.roles):
            raise ForbiddenError("Forbidden")
        return user

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of a 401."""
        return f'Basic realm="{self.realm}"'


def _check_realm(realm: str) -> None:
    # The realm goes into a quoted-string of the WWW-Authenticate header.
    if not realm or any(c == '"' or c == "\\" or ord(c) < 0x20 for c in realm):
        raise RegistrySecurityConfigError(
            f"{REALM_KEY}: expected a name without quotes, backslashes or control "
            f"characters, found {realm!r}"
        )


def _jaas_path(props: Mapping[str, str], environ: Mapping[str, str]) -> Path:
    path = text(props, JAAS_KEY)
    if path is None:
        prefix = f"-D{JAAS_KEY}="
        try:
            words = shlex.split(environ.get(JAAS_ENV, ""))
        except ValueError:
            words = []
        path = next((w[len(prefix) :] for w in words if w.startswith(prefix)), None)
    if not path:
        raise RegistrySecurityConfigError(
            f"{METHOD_KEY}=BASIC needs a JAAS file: set {JAAS_KEY}=<file> (or "
            f"-D{JAAS_KEY}=<file> in {JAAS_ENV}, as for Confluent's registry)"
        )
    return Path(path)


def _users_file(jaas: JaasFile, realm: str) -> Path:
    modules = jaas.entries.get(realm)
    if modules is None:
        found = ", ".join(sorted(jaas.entries)) or "none"
        raise RegistrySecurityConfigError(
            f"JAAS file {jaas.path}: expected an entry named {realm!r} ({REALM_KEY}), found {found}"
        )
    if len(modules) != 1 or modules[0].class_name not in PROPERTY_FILE_MODULES:
        classes = ", ".join(m.class_name for m in modules) or "no module"
        raise RegistrySecurityConfigError(
            f"JAAS file {jaas.path}, entry {realm!r}: expected one "
            f"org.eclipse.jetty.jaas.spi.PropertyFileLoginModule (the only login module Sluice "
            f"supports), found {classes}"
        )
    module = modules[0]
    if module.flag == "optional":
        raise RegistrySecurityConfigError(
            f"JAAS file {jaas.path}, entry {realm!r}: the only login module cannot be "
            "optional (it would let anyone in); make it required"
        )
    users_file = module.options.get("file")
    if not users_file:
        raise RegistrySecurityConfigError(
            f"JAAS file {jaas.path}, entry {realm!r}: PropertyFileLoginModule needs "
            'file="<users file>"'
        )
    return Path(users_file)


class BasicAuthMiddleware:
    """ASGI middleware answering every unauthenticated HTTP request with 401 (or 403)."""

    def __init__(self, app: ASGIApp, authenticator: BasicAuthenticator, content_type: str) -> None:
        self.app = app
        self.authenticator = authenticator
        self.content_type = content_type

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.authenticator.skips(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = None
        for key, value in scope["headers"]:
            if key == b"authorization":
                header = value.decode("latin-1")
                break
        try:
            user = self.authenticator.authenticate(header)
        except (UnauthorizedError, ForbiddenError) as error:
            client = scope.get("client") or ("?", 0)
            reason = (
                "no credentials"
                if header is None
                else "no role allowed in"
                if isinstance(error, ForbiddenError)
                else "wrong or unknown credentials"
            )
            level = logging.DEBUG if header is None else logging.WARNING
            log.log(
                level,
                "refused %s %s from %s:%s: %s",
                scope["method"],
                scope["path"],
                client[0],
                client[1],
                reason,
            )
            await self._refuse(send, error)
            return
        scope["user_name"] = user.name
        await self.app(scope, receive, send)

    async def _refuse(self, send: Send, error: UnauthorizedError | ForbiddenError) -> None:
        body = json.dumps(error.to_json(), separators=(",", ":")).encode()
        headers = [
            (b"content-type", self.content_type.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        if isinstance(error, UnauthorizedError):
            headers.append((b"www-authenticate", self.authenticator.challenge.encode()))
        await send({"type": "http.response.start", "status": error.http_status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
