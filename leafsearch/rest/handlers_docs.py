"""Document endpoints: index, create, get, exists, `_source`, delete, update, bulk, mget."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.json_tokens import token_name
from leafsearch.common.settings import active_shard_count
from leafsearch.errors import (
    ActionRequestValidation,
    ElasticError,
    IllegalArgument,
    ParseException,
    ParsingError,
    ResourceNotFound,
)
from leafsearch.node.slowlog import indexing_timed
from leafsearch.request.search_request import parse_fetch_source, url_source_filter
from leafsearch.request.search_types import SourceFilter
from leafsearch.rest.exchange import RestRequest, RestResponse
from leafsearch.rest.source_filter import apply_source_filter, apply_source_option
from leafsearch.write.documents import stored_fields

if TYPE_CHECKING:
    from leafsearch.node.node import Node

_MGET_DOC_KEYS = frozenset(
    {"_index", "_id", "routing", "_routing", "_source", "stored_fields", "version", "version_type"}
)


def _wait_for_active_shards(req: RestRequest) -> int | str | None:
    """One node holds the one active copy of every shard: a count it can meet is answered at once,
    one it never can is refused by the write (`check_active_shard_count`)."""
    req.time_param("timeout")
    return active_shard_count(req.param("wait_for_active_shards"))


def _write_options(req: RestRequest) -> dict[str, Any]:
    return {
        "wait_for_active_shards": _wait_for_active_shards(req),
        "routing": req.param("routing"),
        "refresh": req.param("refresh"),
        "if_seq_no": req.long_param("if_seq_no"),
        "if_primary_term": req.long_param("if_primary_term"),
    }


def _versioned_write_options(req: RestRequest) -> dict[str, Any]:
    """An index or delete's options, with its external `version` and `version_type`."""
    return {
        **_write_options(req),
        "version": req.long_param("version"),
        "version_type": req.param("version_type"),
    }


def _write_reply(body: dict[str, Any]) -> RestResponse:
    return RestResponse(body, status=201 if body.get("result") == "created" else 200)


def _index(node: Node, req: RestRequest, op_type: str) -> RestResponse:
    started = time.perf_counter()
    body = node.index_doc(
        req.path_params["index"],
        req.path_params.get("id"),
        req.required_body(),
        op_type=op_type,
        require_alias=req.flag("require_alias"),
        **_versioned_write_options(req),
    )
    seconds = time.perf_counter() - started
    indexing_timed(node, body["_index"], body["_id"], req.param("routing"), req.body, seconds)
    return _write_reply(body)


def index_doc(node: Node, req: RestRequest) -> RestResponse:
    return _index(node, req, req.param("op_type") or "index")


def create_doc(node: Node, req: RestRequest) -> RestResponse:
    return _index(node, req, "create")


def _get_options(req: RestRequest) -> dict[str, Any]:
    return {
        "routing": req.param("routing"),
        "realtime": req.flag("realtime", True),
        "refresh": req.flag("refresh"),
    }


_VERSION_TYPES = ("internal", "external", "external_gte")


def _single_get_options(req: RestRequest) -> dict[str, Any]:
    """A single get's options: `version` (checked against the document's) besides the shared ones."""
    version_type = req.param("version_type")
    if version_type is not None and version_type not in _VERSION_TYPES:
        raise IllegalArgument(f"No version type match [{version_type}]")
    return {**_get_options(req), "version": req.long_param("version")}


def _stored_field_names(req: RestRequest) -> list[str] | None:
    stored = req.param("stored_fields")
    return None if stored is None else [f for f in stored.split(",") if f]


def _get_source_filter(req: RestRequest) -> SourceFilter:
    """The URL's `_source` options; without them `stored_fields` leaves the source out unless it
    names `_source` (ShardGetService)."""
    return _item_source_filter({}, url_source_filter(req.params), _stored_field_names(req))


def _not_found(index: str, doc_id: str) -> dict[str, Any]:
    return {"_index": index, "_id": doc_id, "found": False}


def get_doc(node: Node, req: RestRequest) -> RestResponse:
    index, doc_id = req.path_params["index"], req.path_params["id"]
    body = node.get_doc(index, doc_id, **_single_get_options(req))
    if body is None:
        return RestResponse(_not_found(index, doc_id), status=404)
    names = _stored_field_names(req)
    fields = stored_fields(node, index, body.get("_source"), names) if names else {}
    body = apply_source_filter(body, _get_source_filter(req))
    if fields:
        body["fields"] = fields
    return RestResponse(body)


def get_source(node: Node, req: RestRequest) -> RestResponse:
    index, doc_id = req.path_params["index"], req.path_params["id"]
    source_filter = url_source_filter(req.params)
    if source_filter is not None and not source_filter.fetch:  # as RestGetSourceAction refuses it
        raise ActionRequestValidation("fetching source can not be disabled")
    body = node.get_doc(index, doc_id, **_single_get_options(req))
    if body is None:
        raise ResourceNotFound(f"Document not found [{index}]/[{doc_id}]")
    if "_source" not in body:  # the index keeps no source (`_source.enabled: false`)
        raise ResourceNotFound(f"Source not found [{index}]/[{doc_id}]")
    return RestResponse(apply_source_option(body, req)["_source"])


def delete_doc(node: Node, req: RestRequest) -> RestResponse:
    body = node.delete_doc(req.path_params["index"], req.path_params["id"], **_versioned_write_options(req))
    return RestResponse(body, status=404 if body.get("result") == "not_found" else 200)


def update_doc(node: Node, req: RestRequest) -> RestResponse:
    req.required_body()
    retries = req.int_param("retry_on_conflict", 0) or 0
    body = node.update_doc(
        req.path_params["index"],
        req.path_params["id"],
        req.json_object() or {},
        retry_on_conflict=retries,
        require_alias=req.flag("require_alias"),
        source_filter=url_source_filter(req.params),
        **_write_options(req),
    )
    return _write_reply(body)


def bulk(node: Node, req: RestRequest) -> RestResponse:
    wait = _wait_for_active_shards(req)
    return RestResponse(
        node.bulk(
            req.required_body(),
            wait_for_active_shards=wait,
            index=req.path_params.get("index"),
            refresh=req.param("refresh"),
            routing=req.param("routing"),
            authorize=_item_check(req, "indices:data/write/bulk[s]"),
            require_alias=req.flag("require_alias"),
            source_filter=url_source_filter(req.params),
            raw_items=True,
        )
    )


def _item_check(req: RestRequest, action: str) -> Callable[[str], None] | None:
    """The per-index check of a bulk or mget item for the authenticated caller (None: no check)."""
    subject = req.subject
    if subject is None or subject.superuser:
        return None
    return lambda index: subject.check_index(action, index)


def _mget_specs(req: RestRequest) -> list[dict[str, Any]]:
    body = req.json_object()
    if body is None:
        raise ParseException("request body is required")
    default_index = req.path_params.get("index")
    specs: list[dict[str, Any]] = []
    for key, value in body.items():
        if key == "docs" and isinstance(value, list):
            for doc in value:
                if not isinstance(doc, dict):
                    raise ParsingError("docs array element should include an object")
                unknown = set(doc) - _MGET_DOC_KEYS
                if unknown:
                    raise ParseException(
                        f"failed to parse multi get request. unknown field [{sorted(unknown)[0]}]"
                    )
                specs.append(doc)
        elif key == "ids" and isinstance(value, list):
            if default_index is None:
                raise IllegalArgument("ids can only be specified when an index is given in the path")
            specs.extend({"_id": doc_id} for doc_id in value)
        else:
            raise ParsingError(
                f"unknown key [{key}] for a {type(value).__name__.upper()}, expected [docs] or [ids]"
            )
    problems = []
    if not specs:
        problems.append("no documents to get")
    for position, spec in enumerate(specs):
        spec.setdefault("_index", default_index)
        if spec["_index"] is None:
            problems.append(f"index is missing for doc {position}")
        if spec.get("_id") is None:
            problems.append(f"id is missing for doc {position}")
    if problems:
        raise ActionRequestValidation(*problems)
    return specs


def _item_text(value: Any, key: str) -> str:
    """A scalar of an `_mget` document as the parser's `text()` reads it (`"routing": 5` is "5")."""
    if isinstance(value, (dict, list)) or value is None:
        raise ParsingError(f"Unknown key for a {token_name(value)} in [{key}].")
    return value if isinstance(value, str) else orjson.dumps(value).decode()


def _item_stored_fields(spec: dict[str, Any], default: list[str] | None) -> list[str] | None:
    value = spec.get("stored_fields")
    if value is None:
        return default
    values = value if isinstance(value, list) else [value]
    return [_item_text(v, "stored_fields") for v in values]


def _item_source_filter(
    spec: dict[str, Any], default: SourceFilter | None, stored_fields: list[str] | None
) -> SourceFilter:
    """A document's own `_source` wins over the request's; without either, `stored_fields`
    leaves the source out unless it lists `_source` (Elasticsearch's ShardGetService)."""
    if "_source" in spec:
        return parse_fetch_source(spec["_source"])
    if default is not None:
        return default
    return SourceFilter(fetch=stored_fields is None or "_source" in stored_fields)


def mget(node: Node, req: RestRequest) -> RestResponse:
    options = _get_options(req)
    check = _item_check(req, "indices:data/read/mget[shard]")
    default_source = url_source_filter(req.params)
    raw_stored = req.param("stored_fields")
    default_stored = None if raw_stored is None else [f for f in raw_stored.split(",") if f]
    items = []
    for spec in _mget_specs(req):
        routing = spec.get("routing", spec.get("_routing"))
        stored = _item_stored_fields(spec, default_stored)
        items.append(
            (
                _item_text(spec["_index"], "_index"),
                _item_text(spec["_id"], "_id"),
                options["routing"] if routing is None else _item_text(routing, "routing"),
                _item_source_filter(spec, default_source, stored),
            )
        )
    docs = []
    for index, doc_id, routing, source_filter in items:
        try:
            if check is not None:
                check(index)
            found = node.get_doc(index, doc_id, **{**options, "routing": routing})
        except ElasticError as exc:
            docs.append({"_index": index, "_id": doc_id, "error": exc.body()["error"]})
            continue
        docs.append(_not_found(index, doc_id) if found is None else apply_source_filter(found, source_filter))
    return RestResponse({"docs": docs})
