"""Where a broker keeps its users' SCRAM credentials: ZooKeeper, or a file beside the
standalone metadata. One small interface, ``ScramStore``, two implementations.

``ZkScramStore`` (cluster mode) reads and writes Kafka's own ``/config/users/<user>`` znodes
(``UserConfigZnode``), so credentials made by ``kafka-configs --zookeeper`` work and the
other way round; other keys of a user's znode (quotas) are kept. Every write is conditional
on the znode version read (a lost race is retried, at most ``RETRIES`` times). Kafka also
writes a change notification for its brokers' caches; Sluice reads the znode on every
authentication and writes none.

``FileScramStore`` (standalone) keeps the same payloads in one JSON file,
``<first log dir>/sluice-users.json``, mode 0600, rewritten atomically (temp file, fsync,
rename, directory fsync)::

    {"version": 1, "users": {"alice": {"SCRAM-SHA-256": "salt=...,stored_key=...,..."}}}

Only salted credentials are stored (never a password); the file is not shown in any error.

Thread-safety: ``ZkScramStore`` is as thread-safe as its kazoo client (its calls block: run
them off the event loop). ``FileScramStore`` is used on the broker's event loop only.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from sluice.common.atomic_file import write_atomically

from .errors import CredentialFormatError
from .scram_credential import ScramCredential, ScramMechanism, UserConfigZnode

__all__ = ["ScramStore", "ZkScramStore", "FileScramStore", "USERS_FILE", "RETRIES"]

USERS_FILE: Final = "sluice-users.json"
RETRIES: Final = 10
_FILE_VERSION: Final = 1


class ScramStore(ABC):
    """Users' SCRAM credentials by user name and mechanism."""

    @abstractmethod
    def users(self) -> dict[str, UserConfigZnode]:
        """Every user with a config, and the config."""

    @abstractmethod
    def user(self, name: str) -> UserConfigZnode | None:
        """One user's config, ``None`` if the user has none."""

    @abstractmethod
    def set_credential(
        self, name: str, mechanism: ScramMechanism, credential: ScramCredential | None
    ) -> bool:
        """Set (or with ``None`` delete) one credential; whether one was there before."""

    def credential(self, name: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """The user's credential for ``mechanism`` (the ``ScramServer`` lookup)."""
        config = self.user(name)
        return None if config is None else config.credentials().get(mechanism)


class ZkClient(Protocol):
    """What ``ZkScramStore`` uses of a ``kazoo.client.KazooClient``."""

    def get(self, path: str) -> tuple[bytes, Any]: ...
    def get_children(self, path: str) -> list[str]: ...
    def set(self, path: str, value: bytes, version: int = -1) -> Any: ...
    def create(self, path: str, value: bytes = b"", *, makepath: bool = False) -> str: ...
    def delete(self, path: str, version: int = -1) -> Any: ...


class ZkScramStore(ScramStore):
    """``/config/users`` in ZooKeeper; see the module docstring."""

    def __init__(self, zk: ZkClient) -> None:
        self._zk = zk

    def users(self) -> dict[str, UserConfigZnode]:
        try:
            children = self._zk.get_children(UserConfigZnode.ROOT)
        except NoNodeError:
            return {}
        found = {}
        for child in children:
            path = f"{UserConfigZnode.ROOT}/{child}"
            config = self._read(path)
            if config is not None:
                found[UserConfigZnode.user_of(path)] = config[0]
        return found

    def user(self, name: str) -> UserConfigZnode | None:
        found = self._read(UserConfigZnode.path(name))
        return None if found is None else found[0]

    def _read(self, path: str) -> tuple[UserConfigZnode, int] | None:
        try:
            data, stat = self._zk.get(path)
        except NoNodeError:
            return None
        try:
            return UserConfigZnode.decode(data), stat.version
        except CredentialFormatError as exc:
            raise CredentialFormatError(f"{path}: {exc}") from None

    def set_credential(
        self, name: str, mechanism: ScramMechanism, credential: ScramCredential | None
    ) -> bool:
        path = UserConfigZnode.path(name)
        for _ in range(RETRIES):
            found = self._read(path)
            current = found[0] if found is not None else UserConfigZnode({})
            existed = mechanism.mechanism_name in current.config
            data = current.with_credential(mechanism, credential).encode()
            try:
                if found is None:
                    if credential is None:
                        return False
                    self._zk.create(path, data, makepath=True)
                else:
                    self._zk.set(path, data, version=found[1])
                return existed
            except (BadVersionError, NodeExistsError):
                continue  # another writer won: read again
        raise CredentialFormatError(f"{path}: lost {RETRIES} conditional writes in a row")


class FileScramStore(ScramStore):
    """``<directory>/sluice-users.json``; see the module docstring."""

    def __init__(self, directory: str | Path) -> None:
        self.path = Path(directory) / USERS_FILE
        self._users = self._load()

    def _load(self) -> dict[str, UserConfigZnode]:
        try:
            payload: Any = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (UnicodeDecodeError, ValueError):
            raise CredentialFormatError(f"{self.path}: expected JSON") from None
        users = payload.get("users") if isinstance(payload, dict) else None
        if payload.get("version") != _FILE_VERSION or not isinstance(users, dict):
            raise CredentialFormatError(
                f"{self.path}: expected an object with version {_FILE_VERSION} and 'users'"
            )
        found = {}
        for name, config in users.items():
            blob = json.dumps({"version": UserConfigZnode.VERSION, "config": config}).encode()
            try:
                found[name] = UserConfigZnode.decode(blob)
            except CredentialFormatError as exc:
                raise CredentialFormatError(f"{self.path}, user {name!r}: {exc}") from None
        return found

    def users(self) -> dict[str, UserConfigZnode]:
        return dict(self._users)

    def user(self, name: str) -> UserConfigZnode | None:
        return self._users.get(name)

    def set_credential(
        self, name: str, mechanism: ScramMechanism, credential: ScramCredential | None
    ) -> bool:
        current = self._users.get(name, UserConfigZnode({}))
        existed = mechanism.mechanism_name in current.config
        if credential is None and not existed:
            return False
        updated = current.with_credential(mechanism, credential)
        users = dict(self._users)
        if updated.config:
            users[name] = updated
        else:
            users.pop(name, None)
        self._save(users)
        self._users = users
        return existed

    def _save(self, users: Mapping[str, UserConfigZnode]) -> None:
        text = json.dumps(
            {"version": _FILE_VERSION, "users": {n: dict(c.config) for n, c in users.items()}},
            indent=1,
            sort_keys=True,
        )
        write_atomically(self.path, text, mode=0o600)  # credentials: owner only
