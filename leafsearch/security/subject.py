"""The authenticated identity of a request and what its roles allow.

Roles are a small fixed vocabulary, stored by name with each user (and snapshotted into each API
key, as Elasticsearch snapshots its owner's roles into a key created without role descriptors):

- `superuser`: every action, every index, every context.
- `viewer`: read-only on every index (search, count, get, mget, scroll, PIT, index metadata).
- `read:<pattern>`: the same, on the indices matching the pattern (`*` wildcards).
- `write:<pattern>`: everything on the matching indices: documents, bulk, create and delete the
  index, mappings, settings, refresh, flush; reading included.

Every authenticated user may use the cluster's monitoring APIs (their index sections name only
the indices it may read), its own API keys and the contexts it opened. The identity of the
request in progress is held in a context variable set by the REST guard, so that reader contexts
can record and check their owner without every search signature carrying it; in-process callers
(no HTTP) have none and are not checked.
"""

from __future__ import annotations

import contextvars
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from leafsearch.errors import ElasticError, IllegalArgument

SUPERUSER = "superuser"
VIEWER = "viewer"
_PATTERN_ROLES = ("read:", "write:")

#: Index actions a `read`/`viewer` role grants (prefixes of Elasticsearch action names).
_READ_ACTIONS = (
    "indices:data/read/",
    "indices:admin/get",
    "indices:admin/mappings/get",
    "indices:admin/aliases/get",
    "indices:admin/data_stream/get",
    "indices:monitor/",
    # what cluster monitoring (health, node stats) tells of one index is read with that index
    "cluster:monitor/",
)


class SecurityException(ElasticError):
    error_type = "security_exception"
    status = 403


def check_role(role: str) -> str:
    """A role name as stored, or IllegalArgument saying which names exist."""
    if role in (SUPERUSER, VIEWER):
        return role
    if role.startswith(_PATTERN_ROLES) and role.partition(":")[2]:
        return role
    raise IllegalArgument(
        f"unknown role [{role}]: roles are [superuser], [viewer], [read:<index pattern>] "
        "and [write:<index pattern>]"
    )


def is_read_action(action: str) -> bool:
    return action.startswith(_READ_ACTIONS)


def granting_privileges(action: str) -> str:
    """The privilege names that would grant an index action, for the 403 message."""
    return "read,write" if is_read_action(action) else "write"


@dataclass(frozen=True, slots=True)
class Subject:
    """One authenticated caller: a user, or an API key of a user."""

    username: str
    roles: tuple[str, ...]
    api_key_id: str | None = None
    api_key_name: str | None = None

    @property
    def superuser(self) -> bool:
        return SUPERUSER in self.roles

    @property
    def owner_key(self) -> str:
        """Who owns what this caller opens: contexts opened with a key belong to that key."""
        return f"api_key:{self.api_key_id}" if self.api_key_id else f"user:{self.username}"

    def may_on_index(self, action: str, index: str) -> bool:
        if self.superuser:
            return True
        read = is_read_action(action)
        for role in self.roles:
            if role == VIEWER:
                if read:
                    return True
                continue
            kind, _, pattern = role.partition(":")
            if (kind == "write" or (kind == "read" and read)) and fnmatch.fnmatchcase(index, pattern):
                return True
        return False

    def _who(self) -> str:
        if self.api_key_id:
            return f"API key id [{self.api_key_id}] of user [{self.username}]"
        return f"user [{self.username}] with effective roles [{','.join(self.roles)}]"

    def index_refusal(self, action: str, indices: Iterable[str]) -> SecurityException:
        names = ",".join(indices)
        return SecurityException(
            f"action [{action}] is unauthorized for {self._who()} on indices [{names}], "
            f"this action is granted by the index privileges [{granting_privileges(action)}]"
        )

    def cluster_refusal(self, action: str) -> SecurityException:
        return SecurityException(
            f"action [{action}] is unauthorized for {self._who()}, "
            "this action is granted by the cluster privileges [all]"
        )

    def check_index(self, action: str, index: str) -> None:
        """Refuse `action` on one index (bulk and mget items call this per item)."""
        if not self.may_on_index(action, index):
            raise self.index_refusal(action, [index])


CURRENT: contextvars.ContextVar[Subject | None] = contextvars.ContextVar("leafsearch_subject", default=None)


def current() -> Subject | None:
    """The caller of the request being served; None without authentication or outside HTTP."""
    return CURRENT.get()
