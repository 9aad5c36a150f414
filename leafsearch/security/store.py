"""Users and API keys, stored hashed in the data folder's `security/` folder.

`users.json` is written by the `leafsearch users` command (never by the server, which re-reads it
when it changes, so a user added while the node runs can sign in at once); `api_keys.json` is
written by the server only (`POST /_security/api_key`). One writer per file, each write a rename
of a complete 0600 file, so neither ever sees the other's half-written state.

Secrets are hashed with Argon2id (argon2-cffi, its default RFC 9106 parameters). Verifying one
costs tens of milliseconds by design, so a successful verification is remembered in memory as an
HMAC of the secret under a key that lives only in this process (Elasticsearch caches its realms'
successful authentications the same way); a changed hash never matches a remembered one.
Authentication is on as soon as the folder holds a user.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from leafsearch.common.durable import write_private
from leafsearch.security.subject import Subject, check_role

_HASHER = PasswordHasher()
_CACHE_LIMIT = 10_000
USERS_FILE = "users.json"
API_KEYS_FILE = "api_keys.json"


def hash_secret(secret: str) -> str:
    return _HASHER.hash(secret)


class _Verified:
    """Secrets already verified against a given hash, as HMACs under a per-process key."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._seen: set[tuple[str, bytes]] = set()
        self._lock = threading.Lock()

    def verify(self, stored_hash: str, secret: str) -> bool:
        tag = hmac.new(self._key, secret.encode(), hashlib.sha256).digest()
        with self._lock:
            if (stored_hash, tag) in self._seen:
                return True
        try:
            _HASHER.verify(stored_hash, secret)
        except (VerificationError, InvalidHashError):
            return False
        with self._lock:
            if len(self._seen) >= _CACHE_LIMIT:
                self._seen.clear()
            self._seen.add((stored_hash, tag))
        return True


class UserFile:
    """`users.json`: name -> {"hash", "roles"}. Used by the CLI to edit and by the node to read."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / USERS_FILE

    def load(self) -> dict[str, dict[str, Any]]:
        try:
            return orjson.loads(self.path.read_bytes())["users"]
        except FileNotFoundError:
            return {}

    def save(self, users: dict[str, dict[str, Any]]) -> None:
        write_private(self.path, orjson.dumps({"users": users}, option=orjson.OPT_INDENT_2))

    def put(self, name: str, password: str, roles: list[str]) -> None:
        users = self.load()
        users[name] = {"hash": hash_secret(password), "roles": [check_role(r) for r in roles]}
        self.save(users)


class SecurityStore:
    """The node's users and API keys; answers who a request's credentials belong to."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.users_file = UserFile(folder)
        self._keys_path = folder / API_KEYS_FILE
        self._lock = threading.Lock()
        self._users: dict[str, dict[str, Any]] = {}
        self._users_stamp: tuple[int, int] | None = None
        self._verified = _Verified()
        self._decoy_hash: str | None = None
        #: Called with a key's id and record as JSON before the server writes it, when
        #: coordinators share keys (node/cluster_sync.py publishes them to the cluster's metadata).
        self.shared: Callable[[str, bytes], None] | None = None
        #: Called after API keys or users change here (connections parked with a search
        #: worker, authorized before, go back to the general path: search/workers/parking.py).
        self.changed: Callable[[], None] | None = None
        try:
            self._keys: dict[str, dict[str, Any]] = orjson.loads(self._keys_path.read_bytes())["api_keys"]
        except FileNotFoundError:
            self._keys = {}

    def adopt_users(self, data: bytes) -> None:
        """Take the users file another coordinator published as this node's own."""
        write_private(self.users_file.path, data)
        self._changed()

    def adopt_key(self, key_id: str, record: bytes) -> None:
        """Take a key another coordinator created or invalidated."""
        value = orjson.loads(record)
        with self._lock:
            if self._keys.get(key_id) != value:  # (not this node's own, come back)
                self._keys[key_id] = value
                self._save_keys()
        self._changed()

    # ---- users ---------------------------------------------------------------------------

    def _current_users(self) -> dict[str, dict[str, Any]]:
        """The users file as it is now: re-read when its size or modification time changed."""
        try:
            stat = os.stat(self.users_file.path)
            stamp: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp != self._users_stamp:
                self._users = self.users_file.load() if stamp is not None else {}
                self._users_stamp = stamp
            return self._users

    def _decoy(self) -> str:
        with self._lock:
            if self._decoy_hash is None:
                self._decoy_hash = hash_secret(secrets.token_hex(16))
            return self._decoy_hash

    @property
    def enabled(self) -> bool:
        """Authentication is on once the data folder holds a user."""
        return bool(self._current_users())

    def authenticate_user(self, name: str, password: str) -> Subject | None:
        user = self._current_users().get(name)
        if user is None:
            # As long as a wrong password, so that timing does not tell which users exist.
            self._verified.verify(self._decoy(), password)
            return None
        if not self._verified.verify(user["hash"], password):
            return None
        return Subject(name, tuple(user["roles"]))

    # ---- API keys ------------------------------------------------------------------------

    def authenticate_key(self, key_id: str, secret: str) -> Subject | None:
        with self._lock:
            record = self._keys.get(key_id)
        if record is None or record["invalidated"]:
            return None
        expiration = record.get("expiration")
        if expiration is not None and expiration <= time.time() * 1000:
            return None
        if not self._verified.verify(record["hash"], secret):
            return None
        # The owner must still exist: deleting a user ends the keys it made.
        if record["username"] not in self._current_users():
            return None
        return Subject(record["username"], tuple(record["roles"]), key_id, record["name"])

    def create_key(
        self, owner: Subject, name: str, expiration_ms: int | None, metadata: dict[str, Any]
    ) -> dict[str, Any]:
        key_id = _random_token(15)  # 20 characters, as Elasticsearch's ids
        secret = _random_token(16)  # 22 characters
        now = int(time.time() * 1000)
        record = {
            "hash": hash_secret(secret),
            "name": name,
            "username": owner.username,
            "roles": list(owner.roles),
            "creation": now,
            "expiration": None if expiration_ms is None else now + expiration_ms,
            "invalidated": False,
            "metadata": metadata,
        }
        with self._lock:
            self._keys[key_id] = record
            self._share(key_id)
            self._save_keys()
        answer: dict[str, Any] = {"id": key_id, "name": name}
        if record["expiration"] is not None:
            answer["expiration"] = record["expiration"]
        answer["api_key"] = secret
        answer["encoded"] = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
        return answer

    def api_keys(self) -> list[tuple[str, dict[str, Any]]]:
        with self._lock:
            return sorted(self._keys.items(), key=lambda item: item[1]["creation"])

    def invalidate(self, key_ids: list[str]) -> tuple[list[str], list[str]]:
        """(newly invalidated, already invalidated) among `key_ids`."""
        fresh, previously = [], []
        with self._lock:
            for key_id in key_ids:
                record = self._keys[key_id]
                if record["invalidated"]:
                    previously.append(key_id)
                else:
                    record["invalidated"] = True
                    record["invalidation"] = int(time.time() * 1000)
                    self._share(key_id)
                    fresh.append(key_id)
            if fresh:
                self._save_keys()
        if fresh:
            self._changed()
        return fresh, previously

    def key_expiration(self, key_id: str) -> float | None:
        """When a key expires (`time.time()` seconds), None: never."""
        with self._lock:
            record = self._keys.get(key_id)
        expiration = None if record is None else record.get("expiration")
        return None if expiration is None else expiration / 1000

    def _changed(self) -> None:
        if self.changed is not None:
            self.changed()

    def _share(self, key_id: str) -> None:
        if self.shared is not None:
            self.shared(key_id, orjson.dumps(self._keys[key_id]))

    def _save_keys(self) -> None:
        write_private(self._keys_path, orjson.dumps({"api_keys": self._keys}))


def _random_token(size: int) -> str:
    return base64.urlsafe_b64encode(secrets.token_bytes(size)).decode().rstrip("=")
