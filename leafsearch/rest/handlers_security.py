"""Security endpoints: `GET /_security/_authenticate` and `POST|GET|DELETE /_security/api_key`.

Every authenticated user manages its own API keys (Elasticsearch's `manage_own_api_key`); a
superuser sees and invalidates everyone's. A key carries its owner's roles as they were when it
was made. A caller authenticated by an API key reaches only that key, and cannot make another
(Elasticsearch's derived keys need empty role descriptors, which leafsearch's keys cannot have):
else a key that expires, or that its owner invalidates, could leave a copy of itself behind.
Without authentication these APIs answer as Elasticsearch does with security disabled.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from leafsearch.errors import ActionRequestValidation, ElasticError, IllegalArgument, ResourceNotFound
from leafsearch.request.timevalue import parse_time_value
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.security.subject import Subject, current
from leafsearch.unsupported import NotSupported

if TYPE_CHECKING:
    from leafsearch.node.node import Node

_DISABLED = (
    "Security must be explicitly enabled when using a [basic] license. Enable security by setting "
    "[xpack.security.enabled] to [true] in the elasticsearch.yml file and restart the node."
)
_NATIVE = {"name": "default_native", "type": "native"}
_API_KEY_REALM = {"name": "_es_api_key", "type": "_es_api_key"}


def _subject() -> Subject:
    """The caller. Without users, Elasticsearch answers these APIs with its "security is not
    enabled" error as a 500; leafsearch gives the same words as a 400, since no request may
    answer 5xx for what the client sent."""
    subject = current()
    if subject is None:
        raise ElasticError(_DISABLED, status=400)
    return subject


def authenticate(node: Node, req: RestRequest) -> RestResponse:
    subject = _subject()
    body: dict[str, Any] = {
        "username": subject.username,
        "roles": list(subject.roles),
        "full_name": None,
        "email": None,
        "metadata": {},
        "enabled": True,
        "authentication_realm": _API_KEY_REALM if subject.api_key_id else _NATIVE,
        "lookup_realm": _API_KEY_REALM if subject.api_key_id else _NATIVE,
        "authentication_type": "api_key" if subject.api_key_id else "realm",
    }
    if subject.api_key_id:
        body["api_key"] = {"id": subject.api_key_id, "name": subject.api_key_name}
    return RestResponse(body)


def _only_its_own_key(subject: Subject, action: str, key_ids: list[str]) -> None:
    """An API key may get or invalidate itself only: "API key cannot own any other API key"."""
    if subject.api_key_id is not None and key_ids != [subject.api_key_id]:
        raise subject.cluster_refusal(action)


def create_api_key(node: Node, req: RestRequest) -> RestResponse:
    subject = _subject()
    if subject.api_key_id is not None:
        raise IllegalArgument(
            "creating derived api keys requires an explicit role descriptor that is empty (has no privileges)"
        )
    body = req.json_object() or {}
    unknown = set(body) - {"name", "expiration", "role_descriptors", "metadata"}
    if unknown:
        raise IllegalArgument(f"[api_key_request] unknown field [{sorted(unknown)[0]}]")
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ActionRequestValidation("api key name is required")
    if body.get("role_descriptors"):
        raise NotSupported("[role_descriptors]", "a key has its owner's roles")
    expiration = body.get("expiration")
    millis = None if expiration is None else int(parse_time_value(str(expiration), "expiration") * 1000)
    metadata = body.get("metadata") or {}
    return RestResponse(node.security.create_key(subject, name, millis, metadata))


def _visible_keys(node: Node, subject: Subject, req: RestRequest) -> list[tuple[str, dict[str, Any]]]:
    """The keys this caller may see, filtered by the `id`, `name`, `username` and `owner` selectors."""
    key_id, name, username = req.param("id"), req.param("name"), req.param("username")
    owner = req.flag("owner") or not subject.superuser
    found = []
    for kid, record in node.security.api_keys():
        if owner and record["username"] != subject.username:
            continue
        if key_id is not None and kid != key_id:
            continue
        if name is not None and record["name"] != name:
            continue
        if username is not None and record["username"] != username:
            continue
        found.append((kid, record))
    return found


def get_api_keys(node: Node, req: RestRequest) -> RestResponse:
    subject = _subject()
    key_id = req.param("id")
    _only_its_own_key(subject, "cluster:admin/xpack/security/api_key/get", [key_id] if key_id else [])
    keys = _visible_keys(node, subject, req)
    if not keys and (req.param("id") or req.param("name")):
        raise ResourceNotFound("no API key found for the given criteria")  # no such key, or not yours
    active_only = req.flag("active_only")
    rendered = []
    for kid, record in keys:
        if active_only and record["invalidated"]:
            continue
        entry = {
            "id": kid,
            "name": record["name"],
            "type": "rest",
            "creation": record["creation"],
            "invalidated": record["invalidated"],
            "username": record["username"],
            "realm": "default_native",
            "metadata": record["metadata"],
        }
        if record["expiration"] is not None:
            entry["expiration"] = record["expiration"]
        if record["invalidated"]:
            entry["invalidation"] = record["invalidation"]
        rendered.append(entry)
    return RestResponse({"api_keys": rendered})


def invalidate_api_keys(node: Node, req: RestRequest) -> RestResponse:
    subject = _subject()
    body = req.json_object() or {}
    ids = body.get("ids") or ([body["id"]] if body.get("id") else [])
    name, username = body.get("name"), body.get("username")
    own = bool(body.get("owner")) or not subject.superuser
    if not ids and name is None and username is None and not body.get("owner"):
        raise ActionRequestValidation(
            "One of [api key id(s), api key name, username, realm name] must be specified "
            "if [owner] flag is false"
        )
    _only_its_own_key(subject, "cluster:admin/xpack/security/api_key/invalidate", ids)
    chosen = [
        kid
        for kid, record in node.security.api_keys()
        if (not ids or kid in ids)
        and (name is None or record["name"] == name)
        and (username is None or record["username"] == username)
        and (not own or record["username"] == subject.username)
    ]
    fresh, previously = node.security.invalidate(chosen)
    return RestResponse(
        {"invalidated_api_keys": fresh, "previously_invalidated_api_keys": previously, "error_count": 0}
    )
