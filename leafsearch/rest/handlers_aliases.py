"""Alias endpoints: `POST /_aliases`, put/delete/get/exists of `<index>/_alias/<name>`, `_cat/aliases`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from leafsearch.indices import aliases
from leafsearch.rest.cat import Column, render_table
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.security.narrowing import permitted

if TYPE_CHECKING:
    from leafsearch.node.node import Node

CAT_COLUMNS = [
    Column("alias", "alias name", ("a",)),
    Column("index", "index alias points to", ("i", "idx")),
    Column("filter", "filter", ("f", "fi")),
    Column("routing.index", "index routing", ("ri", "routingIndex")),
    Column("routing.search", "search routing", ("rs", "routingSearch")),
    Column("is_write_index", "write index", ("w", "isWriteIndex")),
]


UPDATE_ACTION = "indices:admin/aliases"
#: Listing aliases: the caller sees those it may use by their own names (`rest/access.py` refuses
#: the explicit names it may not use), as Elasticsearch replaces alias wildcards with them.
GET_ACTION = "indices:admin/aliases/get"


def _authorize(req: RestRequest, names: Iterable[str]) -> None:
    """An alias change needs the caller's privilege on every index and alias name it gives, as
    Elasticsearch requires it on both (the route guard checks only the path's indices)."""
    subject = req.subject
    if subject is None or subject.superuser:
        return
    refused = [name for name in dict.fromkeys(names) if not subject.may_on_index(UPDATE_ACTION, name)]
    if refused:
        raise subject.index_refusal(UPDATE_ACTION, refused)


def update_aliases(node: Node, req: RestRequest) -> RestResponse:
    actions = aliases.parse_actions(req.json_object())
    _authorize(req, (name for action in actions for name in (*action.indices, *action.aliases)))
    return RestResponse(aliases.update_aliases(node, actions))


def put_alias(node: Node, req: RestRequest) -> RestResponse:
    _authorize(req, [req.path_params["name"]])
    body = req.json_object() if req.body else None
    return RestResponse(aliases.put_alias(node, req.path_params["index"], req.path_params["name"], body))


def delete_alias(node: Node, req: RestRequest) -> RestResponse:
    _authorize(req, req.path_params["name"].split(","))
    return RestResponse(aliases.delete_alias(node, req.path_params["index"], req.path_params["name"]))


def _get_aliases(node: Node, req: RestRequest) -> tuple[int, dict[str, Any]]:
    return aliases.get_aliases(
        node,
        req.path_params.get("index"),
        req.path_params.get("name"),
        expand_wildcards=req.param("expand_wildcards", "all") or "all",
        shown=permitted(req.subject, GET_ACTION),
    )


def get_aliases(node: Node, req: RestRequest) -> RestResponse:
    status, body = _get_aliases(node, req)
    return RestResponse(body, status=status)


def alias_exists(node: Node, req: RestRequest) -> RestResponse:
    """`HEAD /_alias/<name>`: 200 when some index has a matching alias, else 404."""
    status, body = _get_aliases(node, req)
    found = status == 200 and any(entry["aliases"] for entry in body.values())
    return RestResponse(status=200 if found else 404)


def cat_aliases(node: Node, req: RestRequest) -> RestResponse:
    rows = aliases.cat_rows(node, req.path_params.get("name"), shown=permitted(req.subject, GET_ACTION))
    return render_table(req, CAT_COLUMNS, rows)
