"""Document writes and realtime reads: index, create, get, delete, update, bulk.

These are Node methods (bound in node.py). Every write is parsed against the mapping before it is
logged, so a value that does not fit its field changes nothing; the translog is fsynced before
the response is returned, so an acknowledged write survives `kill -9`.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.aliases import single_index, write_target
from leafsearch.bulk_offload import Prepared, PreparedBatch, prepare
from leafsearch.bulk_request import BulkOp, parse_bulk
from leafsearch.errors import (
    ActionRequestValidation,
    DocumentMissing,
    DocumentSourceMissing,
    ElasticError,
    IllegalArgument,
    IndexClosed,
    IndexNotFound,
    VersionConflict,
)
from leafsearch.index.parsed import ParsedBatch
from leafsearch.index.shard import PRIMARY_TERM, DocState, Shard, SyncPoint
from leafsearch.rawjson import RawJSON
from leafsearch.request.search_request import parse_fetch_source
from leafsearch.request.search_types import SourceFilter
from leafsearch.search.fetch import extract_fields, filter_source
from leafsearch.settings import check_active_shard_count
from leafsearch.suggestions import did_you_mean
from leafsearch.unsupported import NotSupported
from leafsearch.versioning import ExternalVersion, VersionRefused, parse_versioning

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.node import Node

MAX_ID_BYTES = 512


def generate_id() -> str:
    """A 20-character URL-safe id, like Elasticsearch's auto-generated ids."""
    return base64.urlsafe_b64encode(os.urandom(15)).decode()


def _write_index(node: Node, name: str) -> Index:
    """The target of a write, created with default settings when missing (auto-create)."""
    index = node.indices.get(name)
    if index is not None:
        index.check_open()
        return index
    from leafsearch.admin import auto_create_index

    return auto_create_index(node, name)


def _shards_header(index: Index) -> dict[str, int]:
    replicas = int(index.setting("index.number_of_replicas"))
    return {"total": 1 + replicas, "successful": 1, "failed": 0}


def _check_id(doc_id: str) -> None:
    """An id Elasticsearch takes: at most 512 bytes; an empty one is refused by the index routing
    of an index/create (illegal argument; an update's or delete's never gets here, see
    `bulk_request.parse_bulk`)."""
    size = len(doc_id.encode())
    if size > MAX_ID_BYTES:
        raise ActionRequestValidation(
            f"id [{doc_id}] is too long, must be no longer than 512 bytes but was: {size}"
        )
    if not doc_id:
        raise IllegalArgument("if _id is specified it must not be empty")


def _conflict_extra(index: Index, shard: Shard) -> dict[str, str]:
    return {"index_uuid": index.uuid, "shard": str(shard.shard_id), "index": index.name}


def _check_seq_no(
    index: Index,
    shard: Shard,
    doc_id: str,
    prior: DocState | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
) -> None:
    if if_seq_no is None and if_primary_term is None:
        return
    required = (
        f"[{doc_id}]: version conflict, required seqNo [{if_seq_no}], primary term [{if_primary_term}]."
    )
    if prior is None or prior.deleted:
        raise VersionConflict(f"{required} but no document was found", extra=_conflict_extra(index, shard))
    if prior.seq_no != if_seq_no or (if_primary_term is not None and if_primary_term != PRIMARY_TERM):
        raise VersionConflict(
            f"{required} current document has seqNo [{prior.seq_no}] and primary term [{PRIMARY_TERM}]",
            extra=_conflict_extra(index, shard),
        )


def _exists(state: DocState | None) -> bool:
    return state is not None and not state.deleted


def _index_checks(
    index: Index,
    shard: Shard,
    doc_id: str,
    op_type: str,
    if_seq_no: int | None,
    if_primary_term: int | None,
    auto_id: bool,
    external: ExternalVersion | None = None,
) -> tuple[DocState | None, int]:
    """(prior state, new version) of an index/create operation; raises its version conflict."""
    prior = None if auto_id else shard.current(doc_id)
    if op_type == "create" and _exists(prior):
        raise VersionConflict(
            f"[{doc_id}]: version conflict, document already exists (current version [{prior.version}])",
            extra=_conflict_extra(index, shard),
        )
    _check_seq_no(index, shard, doc_id, prior, if_seq_no, if_primary_term)
    return prior, _next_version(index, shard, doc_id, prior, external)


def _next_version(
    index: Index, shard: Shard, doc_id: str, prior: DocState | None, external: ExternalVersion | None
) -> int:
    """The version a write gives the document: the previous one (a delete's tombstone included)
    plus one, or the external version when it is above the current one."""
    if external is None:
        return prior.version + 1 if prior is not None and prior.version > 0 else 1
    # A looked-up id never written is a deleted state without a sequence number.
    current = None if prior is None or (prior.deleted and prior.seq_no < 0) else prior.version
    try:
        return external.next_version(doc_id, current)
    except VersionRefused as refused:
        raise VersionConflict(refused.reason, extra=_conflict_extra(index, shard)) from None


def _index_response(
    index: Index, doc_id: str, version: int, prior: DocState | None, seq_no: int, header: dict[str, int]
) -> dict[str, Any]:
    return {
        "_index": index.name,
        "_id": doc_id,
        "_version": version,
        "result": "updated" if _exists(prior) else "created",
        "_shards": header,
        "_seq_no": seq_no,
        "_primary_term": PRIMARY_TERM,
    }


def _apply_index(
    index: Index,
    shard: Shard,
    doc_id: str,
    source: bytes,
    *,
    op_type: str,
    routing: str | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
    auto_id: bool = False,
    parsed=None,
    shards_header: dict[str, int] | None = None,
    external: ExternalVersion | None = None,
) -> dict[str, Any]:
    """One index/create operation against a shard whose lock the caller holds."""
    if parsed is None:
        parsed = index.parse(source, doc_id)
    prior, version = _index_checks(
        index, shard, doc_id, op_type, if_seq_no, if_primary_term, auto_id, external
    )
    seq_no = shard.index(doc_id, parsed, routing, prior, version)
    return _index_response(index, doc_id, version, prior, seq_no, shards_header or _shards_header(index))


def _after_write(
    node: Node, index: Index, shard: Shard, point: SyncPoint, refresh: str | None, response: dict
) -> None:
    """Make the write durable (an fsync shared with concurrent requests), then honour `?refresh`."""
    shard.sync(point)
    index.last_write = time.monotonic()
    if refresh in ("true", ""):
        shard.refresh()
        response["forced_refresh"] = True
    elif refresh == "wait_for":
        shard.refresh()
    elif refresh not in (None, "false"):
        raise IllegalArgument(f"Unknown value for refresh: [{refresh}].")


def _check_refresh(refresh: str | None) -> None:
    if refresh not in (None, "", "true", "false", "wait_for"):
        raise IllegalArgument(f"Unknown value for refresh: [{refresh}].")


def index_doc(
    node: Node,
    index_name: str,
    doc_id: str | None,
    source: bytes,
    *,
    op_type: str = "index",
    routing: str | None = None,
    refresh: str | None = None,
    if_seq_no: int | None = None,
    if_primary_term: int | None = None,
    require_alias: bool = False,
    wait_for_active_shards: int | str | None = None,
    version: int | None = None,
    version_type: str | None = None,
) -> dict[str, Any]:
    """Index or create one document. `version` with `version_type` external(_gte): see
    versioning.py."""
    _check_refresh(refresh)
    if op_type not in ("index", "create"):
        raise IllegalArgument(f"opType must be 'create' or 'index', found: [{op_type}]")
    if op_type == "create" and (if_seq_no is not None or if_primary_term is not None):
        raise ActionRequestValidation("create operations do not support compare and set. use index instead")
    external = parse_versioning(version, version_type, if_seq_no)
    if external is not None and doc_id is None:
        raise ActionRequestValidation("an id must be provided if version type or value are set")
    auto_id = doc_id is None
    if auto_id:
        doc_id = generate_id()
        if op_type == "index":
            op_type = "create"
    _check_id(doc_id)
    index_name, routing = write_target(node, index_name, routing, require_alias=require_alias)
    index = _write_index(node, index_name)
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    parsed = index.parse(source, doc_id)
    with shard.writing() as point:
        response = _apply_index(
            index,
            shard,
            doc_id,
            source,
            op_type=op_type,
            routing=routing,
            if_seq_no=if_seq_no,
            if_primary_term=if_primary_term,
            auto_id=auto_id,
            parsed=parsed,
            external=external,
        )
    _after_write(node, index, shard, point, refresh, response)
    return response


def _check_active_shards(index: Index, wait: int | str | None) -> None:
    check_active_shard_count(wait, int(index.setting("index.number_of_replicas")))


def _check_routing_required(index: Index, routing: str | None, doc_id: str) -> None:
    if routing is None and index.mapping.routing_required:
        raise ElasticError(
            f"routing is required for [{index.name}]/[{doc_id}]",
            status=400,
            error_type="routing_missing_exception",
            extra={"index_uuid": index.uuid, "index": index.name},
        )


def _read_index(node: Node, index_name: str) -> Index:
    """The index a single-document read names; an alias must stand for one index."""
    index = node.indices.get(single_index(node, index_name))
    if index is None:
        raise IndexNotFound(index_name)
    index.check_open()
    return index


def get_doc(
    node: Node,
    index_name: str,
    doc_id: str,
    *,
    routing: str | None = None,
    realtime: bool = True,
    refresh: bool = False,
    version: int | None = None,
) -> dict[str, Any] | None:
    """The current document (realtime: unrefreshed writes included), None when absent; with
    `version`, a document of another version is a conflict (409), as Elasticsearch's get."""
    index = _read_index(node, index_name)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    with shard.stats.get() as found:
        state, source = _read_doc(shard, doc_id, realtime=realtime, refresh=refresh)
        found[0] = state is not None
    if state is None:
        return None
    if version is not None and state.version != version:
        raise VersionConflict(
            f"[{doc_id}]: version conflict, current version [{state.version}] is different than the one "
            f"provided [{version}]",
            extra=_conflict_extra(index, shard),
        )
    body: dict[str, Any] = {
        "_index": index.name,
        "_id": doc_id,
        "_version": state.version,
        "_seq_no": state.seq_no,
        "_primary_term": PRIMARY_TERM,
        "found": True,
    }
    if state.routing is not None:
        body["_routing"] = state.routing
    if index.mapping.source_enabled:
        body["_source"] = RawJSON(source)
    return body


def _read_doc(shard: Shard, doc_id: str, *, realtime: bool, refresh: bool) -> tuple[DocState | None, bytes]:
    """The document's state and source (None when absent), realtime or from the last snapshot."""
    if refresh:
        shard.refresh()
    if not realtime:
        return _get_from_searcher(shard, doc_id)
    with shard.lock:
        shard.check_open()
        shard.recover_if_failed()  # a failed translog may leave operations that are not durable
        state = shard.current(doc_id)
        if not _exists(state):
            return None, b""
        return state, shard.get_source(state)


def stored_fields(node: Node, index_name: str, source: Any, names: list[str]) -> dict[str, list]:
    """The values a get shows under `fields` for `stored_fields`: those of the named fields
    mapped with `store: true` (read from the document's source, which holds what was stored),
    printed as the field type prints them."""
    mapping = _read_index(node, index_name).mapping
    specs = [
        {"field": path}
        for name in names
        for path in mapping.resolve_fields(name)
        if getattr(mapping.field(path), "store", False)
    ]
    if not specs or not isinstance(source, RawJSON):
        return {}
    return extract_fields(source.parsed(), mapping, specs)


def _get_from_searcher(shard: Shard, doc_id: str) -> tuple[DocState | None, bytes]:
    """A non-realtime get reads the last published snapshot, as Elasticsearch does."""
    from leafsearch.index.segment import to_term_array

    searcher = shard.acquire_searcher()
    try:
        key = to_term_array([doc_id])
        for view in reversed(searcher.views):
            seg = view.segment
            lo, hi = seg.lookup_ids(key)
            for i in range(int(lo[0]), int(hi[0])):
                doc = int(seg.id_docs[i])
                if view.live is None or view.live[doc]:
                    state = DocState(int(seg.versions[doc]), int(seg.seq_nos[doc]), False, seg, doc)
                    return state, seg.sources([doc])[0]
        return None, b""
    finally:
        searcher.release()


def delete_doc(
    node: Node,
    index_name: str,
    doc_id: str,
    *,
    routing: str | None = None,
    refresh: str | None = None,
    if_seq_no: int | None = None,
    if_primary_term: int | None = None,
    wait_for_active_shards: int | str | None = None,
    version: int | None = None,
    version_type: str | None = None,
) -> dict[str, Any]:
    """Delete by id; `result: not_found` (the REST layer answers 404) when absent. `version`
    with `version_type` external(_gte): see versioning.py."""
    _check_refresh(refresh)
    index_name, routing = write_target(node, index_name, routing, require_alias=False)
    external = parse_versioning(version, version_type, if_seq_no)
    index = _read_index(node, index_name)
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    with shard.writing() as point:
        response = _apply_delete(index, shard, doc_id, if_seq_no, if_primary_term, external)
    _after_write(node, index, shard, point, refresh, response)
    return response


def _apply_delete(
    index: Index,
    shard: Shard,
    doc_id: str,
    if_seq_no: int | None,
    if_primary_term: int | None,
    external: ExternalVersion | None = None,
) -> dict[str, Any]:
    prior = shard.current(doc_id)
    _check_seq_no(index, shard, doc_id, prior, if_seq_no, if_primary_term)
    found = _exists(prior)
    version = _next_version(index, shard, doc_id, prior, external)
    seq_no = shard.delete(doc_id, prior, version)  # type: ignore[arg-type]
    return {
        "_index": index.name,
        "_id": doc_id,
        "_version": version,
        "result": "deleted" if found else "not_found",
        "_shards": _shards_header(index),
        "_seq_no": seq_no,
        "_primary_term": PRIMARY_TERM,
    }


def _deep_merge(base: dict, patch: dict) -> dict:
    out = dict(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


_UPDATE_KEYS = {"doc", "upsert", "doc_as_upsert", "detect_noop", "scripted_upsert", "_source", "script"}
#: Every field UpdateRequest's parser declares, for its "did you mean" hint.
_UPDATE_FIELDS = (*sorted(_UPDATE_KEYS), "if_primary_term", "if_seq_no")


def _updated_source(doc_id: str, body: dict, prior_source: bytes | None) -> tuple[bytes | None, str]:
    """(new source, result) of an update request; source None means a no-op."""
    unknown = next((key for key in body if key not in _UPDATE_KEYS), None)
    if unknown is not None:
        raise ElasticError(
            f"[UpdateRequest] unknown field [{unknown}]{did_you_mean(unknown, _UPDATE_FIELDS)}",
            status=400,
            error_type="x_content_parse_exception",
        )
    if "script" in body:
        raise NotSupported("[script] in an update", "send a partial [doc] instead")
    doc = body.get("doc")
    if doc is not None and not isinstance(doc, dict):
        raise ElasticError(
            "[UpdateRequest] failed to parse field [doc]", status=400, error_type="x_content_parse_exception"
        )
    if prior_source is None:
        if body.get("doc_as_upsert") and doc is not None:
            return _encode(doc), "created"
        if "upsert" in body:
            return _encode(body["upsert"]), "created"
        raise DocumentMissing(f"[{doc_id}]: document missing", extra={"index": "", "shard": "0"})
    if doc is None:
        raise ActionRequestValidation("script or doc is missing")
    _check_nesting(doc)  # before merging: `_deep_merge` recurses as deep as the partial document
    current = orjson.loads(prior_source)
    merged = _deep_merge(current, doc)
    if body.get("detect_noop", True) and merged == current:
        return None, "noop"
    return _encode(merged), "updated"


#: orjson writes JSON nested at most this deep; an update producing a deeper source is refused.
MAX_UPDATE_NESTING = 254


def _check_nesting(value: Any) -> None:
    """400 if `value` nests deeper than a rewritten source can be; measured with a stack."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_UPDATE_NESTING:
            raise IllegalArgument(
                f"Document nesting depth ({depth}) exceeds the maximum allowed ({MAX_UPDATE_NESTING})"
            )
        children = item.values() if type(item) is dict else item if type(item) is list else ()
        stack.extend((child, depth + 1) for child in children if type(child) in (dict, list))


def _encode(source: Any) -> bytes:
    """The source an update writes, checked before it is encoded."""
    _check_nesting(source)
    return orjson.dumps(source)


def update_doc(
    node: Node,
    index_name: str,
    doc_id: str,
    body: dict,
    *,
    routing: str | None = None,
    refresh: str | None = None,
    if_seq_no: int | None = None,
    if_primary_term: int | None = None,
    retry_on_conflict: int = 0,
    wait_for_active_shards: int | str | None = None,
    require_alias: bool = False,
    source_filter: SourceFilter | None = None,
) -> dict[str, Any]:
    """A partial update. It reads and writes under the shard lock, so no concurrent write can
    conflict with it: `retry_on_conflict` is accepted for compatibility and never needed.
    `source_filter`: the URL's `_source` options (the body's `_source` wins)."""
    _check_refresh(refresh)
    index_name, routing = write_target(node, index_name, routing, require_alias=require_alias)
    index = _write_index(node, index_name)
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    with shard.writing() as point:
        response = _apply_update(
            index, shard, doc_id, body, routing, if_seq_no, if_primary_term, source_filter
        )
    _after_write(node, index, shard, point, refresh, response)
    return response


def _apply_update(
    index: Index,
    shard: Shard,
    doc_id: str,
    body: dict,
    routing: str | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
    source_filter: SourceFilter | None = None,
) -> dict[str, Any]:
    """Read, merge and write one update. As Elasticsearch's UpdateHelper, a missing document
    without an upsert is `document_missing_exception` (404) before `if_seq_no` is looked at.
    With a `_source` filter that fetches (the body's `_source`, else the URL's), the response
    carries the written document as `get`."""
    prior = shard.current(doc_id)
    prior_source = shard.get_source(prior) if _exists(prior) else None
    if prior_source is not None:
        _check_seq_no(index, shard, doc_id, prior, if_seq_no, if_primary_term)
        if not index.mapping.source_enabled:
            raise DocumentSourceMissing(
                f"[{doc_id}]: document source missing", extra=_conflict_extra(index, shard)
            )
    try:
        source, result = _updated_source(doc_id, body, prior_source)
    except DocumentMissing as exc:
        exc.extra = _conflict_extra(index, shard)
        raise
    if prior_source is None:  # an upsert: `if_seq_no` has no document to match
        _check_seq_no(index, shard, doc_id, prior, if_seq_no, if_primary_term)
    if source is None:
        shard.stats.add(noop_update_total=1)
        response = {
            "_index": index.name,
            "_id": doc_id,
            "_version": prior.version,  # type: ignore[union-attr]
            "result": "noop",
            "_shards": {"total": 0, "successful": 0, "failed": 0},
            "_seq_no": prior.seq_no,  # type: ignore[union-attr]
            "_primary_term": PRIMARY_TERM,
        }
    else:
        response = _apply_index(
            index,
            shard,
            doc_id,
            source,
            op_type="index",
            routing=routing,
            if_seq_no=None,
            if_primary_term=None,
        )
        response["result"] = result
    if "_source" in body:
        source_filter = parse_fetch_source(body["_source"])
    if source_filter is not None and source_filter.fetch:
        response["get"] = _get_result(
            index, response, source if source is not None else prior_source, routing, source_filter
        )
    return response


def _get_result(
    index: Index, response: dict[str, Any], source: bytes | None, routing: str | None, flt: SourceFilter
) -> dict[str, Any]:
    """The `get` of an update response (Elasticsearch's GetResult, embedded): the document as
    written, its source filtered as a get filters it."""
    got: dict[str, Any] = {"_seq_no": response["_seq_no"], "_primary_term": response["_primary_term"]}
    if routing is not None:
        got["_routing"] = routing
    got["found"] = True
    filtered = filter_source(source, flt) if source is not None and index.mapping.source_enabled else None
    if filtered is not None:
        got["_source"] = RawJSON(filtered)
    return got


# ---- bulk ----------------------------------------------------------------------------------


def _item_error(op: BulkOp, doc_id: str | None, exc: ElasticError) -> dict[str, Any]:
    item: dict[str, Any] = {"_index": op.index, "_id": doc_id, "status": exc.status}
    item["error"] = exc._cause_body()
    return item


def bulk(
    node: Node,
    body: bytes,
    *,
    index: str | None = None,
    refresh: str | None = None,
    routing: str | None = None,
    wait_for_active_shards: int | str | None = None,
    authorize: Callable[[str], None] | None = None,
    require_alias: bool = False,
    source_filter: SourceFilter | None = None,
) -> dict[str, Any]:
    """`authorize(index)` raises for an index the caller may not write: its items fail, as
    Elasticsearch fails the items of a bulk request on an unauthorized index. An item naming an
    alias goes to its write index; `require_alias` (or the item's own) refuses any other name.
    `source_filter`: the URL's `_source` options, which make updates answer their document (`get`).

    A large body that arrives while another request holds the node's indexing slot is split,
    and its documents parsed, in the search workers meanwhile (`bulk_offload.py`). Applying the
    operations (and parsing what the workers did not) takes the slot (`Node.indexing`, one: that
    work holds the interpreter, and several requests doing it at once only slow each other
    down); the fsync and the refresh happen outside it, so one request's fsync overlaps the next
    one's parsing, and requests waiting together share fsyncs."""
    started = time.perf_counter()
    _check_refresh(refresh)
    prepared = prepare(node, body, index, routing, source_filter, require_alias)
    with node.indexing:
        ops, results, touched = _apply_bulk(
            node,
            body,
            index,
            routing,
            wait_for_active_shards,
            authorize,
            require_alias,
            source_filter,
            prepared,
        )
    for index_obj, shards in touched.values():
        for shard, (point, positions) in shards.items():
            try:
                shard.sync(point)
            except ElasticError as exc:  # none of this shard's operations is acknowledged
                for pos in positions:
                    if "error" not in next(iter(results[pos].values())):
                        kind, item = next(iter(results[pos].items()))
                        results[pos] = {kind: _item_error(ops[pos], item.get("_id"), exc)}
        index_obj.last_write = time.monotonic()
        if refresh in ("true", "", "wait_for"):
            for shard in shards:
                shard.refresh()
    errors = any("error" in next(iter(item.values())) for item in results)
    return {"errors": errors, "took": int((time.perf_counter() - started) * 1000), "items": results}


def _apply_bulk(
    node: Node,
    body: bytes,
    index: str | None,
    routing: str | None,
    wait_for_active_shards: int | str | None,
    authorize: Callable[[str], None] | None,
    require_alias: bool,
    source_filter: SourceFilter | None = None,
    prepared: Prepared | None = None,
) -> tuple[list[BulkOp], list[dict[str, Any]], dict[str, tuple[Index, dict[Shard, _Logged]]]]:
    """Parse a bulk body (unless a worker did: `prepared`) and apply its operations (logged, not
    yet synced): the operations, the item results so far, and per index what each shard logged."""
    ops = prepared.ops if prepared is not None else parse_bulk(body, index, routing, source_filter)
    touched: dict[str, tuple[Index, dict[Shard, _Logged]]] = {}
    by_index: dict[str, list[tuple[int, BulkOp]]] = {}
    results: list[dict[str, Any]] = [{}] * len(ops)
    refusals: dict[str, ElasticError | None] = {}  # per name an item gives, the caller's refusal
    for pos, op in enumerate(ops):
        try:
            if authorize is not None:
                if op.index not in refusals:
                    refusals[op.index] = _refusal(authorize, op.index)
                if refusals[op.index] is not None:
                    raise refusals[op.index]  # type: ignore[misc]
            concrete, op.routing = write_target(
                node, op.index, op.routing, require_alias=op.meta.get("require_alias", require_alias)
            )
        except ElasticError as exc:
            results[pos] = {op.kind: _item_error(op, op.meta.get("_id"), exc)}
            continue
        by_index.setdefault(concrete, []).append((pos, op))
    for index_name, entries in by_index.items():
        try:
            target = _bulk_target(node, index_name, entries)
            _check_active_shards(target, wait_for_active_shards)
        except ElasticError as exc:
            for pos, op in entries:
                results[pos] = {op.kind: _item_error(op, op.meta.get("_id"), exc)}
            continue
        shards = touched.setdefault(index_name, (target, {}))[1]
        _bulk_into(target, entries, results, shards, prepared.batches.get(target.uuid) if prepared else None)
    return ops, results, touched


def _refusal(authorize: Callable[[str], None], name: str) -> ElasticError | None:
    try:
        authorize(name)
    except ElasticError as exc:
        return exc
    return None


def _bulk_target(node: Node, name: str, entries: list[tuple[int, BulkOp]]) -> Index:
    """The index of a bulk request's operations on `name`. As in Elasticsearch, deletes alone never
    create a missing index: each of them fails with `index_not_found_exception`."""
    if all(op.kind == "delete" for _, op in entries):
        return _read_index(node, name)
    return _write_index(node, name)


#: (position in the request, operation, id, whether the id was generated)
_ShardOp = tuple[int, BulkOp, str, bool]
#: What a bulk request logged into one shard: where to sync to, and the positions of its items.
_Logged = tuple[SyncPoint, list[int]]


def _bulk_into(
    index: Index,
    entries: list[tuple[int, BulkOp]],
    results: list,
    touched: dict[Shard, _Logged],
    prepared: PreparedBatch | None = None,
) -> None:
    """Apply one index's operations, grouped by shard so each shard lock and id lookup is batched.
    `prepared`: the index's documents parsed in a worker, used while the mapping is unchanged."""
    header = _shards_header(index)
    per_shard: dict[Shard, list[_ShardOp]] = {}
    for pos, op in entries:
        doc_id = op.meta.get("_id")
        auto_id = doc_id is None
        if auto_id:
            doc_id = generate_id()
        per_shard.setdefault(index.shard_of(doc_id, op.routing), []).append((pos, op, doc_id, auto_id))
    for shard, shard_ops in per_shard.items():
        started = time.perf_counter_ns()
        parsed = rows = None
        if all(op.kind in ("index", "create") for _, op, _, _ in shard_ops):
            parsed, rows = _parsed_batch(index, shard_ops, prepared)
        with ExitStack() as stack:
            try:
                point = stack.enter_context(shard.writing())
            except IndexClosed as exc:  # closed since the request found the index: nothing applied
                for pos, op, doc_id, _ in shard_ops:
                    results[pos] = {op.kind: _item_error(op, doc_id, exc)}
                continue
            touched[shard] = (point, [pos for pos, _, _, _ in shard_ops])
            shard.prefetch([doc_id for _, _, doc_id, auto_id in shard_ops if not auto_id])
            if parsed is None:
                for pos, op, doc_id, auto_id in shard_ops:
                    results[pos] = _bulk_one(index, shard, op, doc_id, header, auto_id=auto_id)
            else:
                _bulk_index_batch(index, shard, shard_ops, parsed, rows, header, results)
        size = sum(len(op.source) for _, op, _, _ in shard_ops if op.source is not None)
        shard.stats.add(bulk_total=1, bulk_time=time.perf_counter_ns() - started, bulk_size=size)


def _parsed_batch(
    index: Index, shard_ops: list[_ShardOp], prepared: PreparedBatch | None
) -> tuple[ParsedBatch | None, list[int]]:
    """A shard's index/create documents parsed together, and the row of each operation: from the
    worker's batch while the mapping is at the version it was parsed against (a batch parses
    each document alone, so the rows of a larger batch hold what this shard's own would), else
    parsed here (None: one by one)."""
    if prepared is not None and index.mapping.version == prepared.version:
        rows = [prepared.row_of.get(pos) for pos, _, _, _ in shard_ops]
        if None not in rows:
            return prepared.batch, rows  # type: ignore[return-value]
    parsed = index.parse_batch([op.source for _, op, _, _ in shard_ops])  # type: ignore[misc]
    return parsed, list(range(len(shard_ops)))


def _index_op_type(op: BulkOp, auto_id: bool) -> str:
    return "create" if op.kind == "create" or op.meta.get("op_type") == "create" or auto_id else "index"


def _bulk_index_batch(
    index: Index,
    shard: Shard,
    shard_ops: list[_ShardOp],
    parsed: ParsedBatch,
    rows: list[int],
    header: dict[str, int],
    results: list,
) -> None:
    """Index/create operations whose documents parsed together (operation i at `rows[i]` of the
    batch): `_bulk_one`'s checks and answers, with the values added to the shard column by column."""
    with shard.index_batch(parsed) as batch:
        for row, (pos, op, doc_id, auto_id) in zip(rows, shard_ops, strict=True):
            meta = op.meta
            try:
                _check_id(doc_id)
                _check_routing_required(index, op.routing, doc_id)
                prior, version = _index_checks(
                    index,
                    shard,
                    doc_id,
                    _index_op_type(op, auto_id),
                    meta.get("if_seq_no"),
                    meta.get("if_primary_term"),
                    auto_id,
                    op.external,
                )
                seq_no = batch.index(row, doc_id, op.routing, prior, version)
            except ElasticError as exc:
                results[pos] = {op.kind: _item_error(op, doc_id, exc)}
                continue
            response = _index_response(index, doc_id, version, prior, seq_no, header)
            response["status"] = 200 if _exists(prior) else 201
            results[pos] = {op.kind: response}


_STATUS = {"created": 201, "updated": 200, "deleted": 200, "not_found": 404, "noop": 200}


def _bulk_one(
    index: Index, shard: Shard, op: BulkOp, doc_id: str, header: dict[str, int], *, auto_id: bool
) -> dict[str, Any]:
    kind = op.kind
    meta = op.meta
    try:
        if kind != "delete":
            _check_id(doc_id)
        if_seq_no = meta.get("if_seq_no")
        if_primary_term = meta.get("if_primary_term")
        _check_routing_required(index, op.routing, doc_id)
        if kind in ("index", "create"):
            response = _apply_index(
                index,
                shard,
                doc_id,
                op.source,  # type: ignore[arg-type]
                op_type=_index_op_type(op, auto_id),
                routing=op.routing,
                if_seq_no=if_seq_no,
                if_primary_term=if_primary_term,
                auto_id=auto_id,
                shards_header=header,
                external=op.external,
            )
        elif kind == "delete":
            response = _apply_delete(index, shard, doc_id, if_seq_no, if_primary_term, op.external)
        else:
            try:
                body = orjson.loads(op.source)  # type: ignore[arg-type]
            except orjson.JSONDecodeError as exc:
                raise ElasticError(
                    f"Failed to parse update request: {exc}",
                    status=400,
                    error_type="x_content_parse_exception",
                ) from None
            if not isinstance(body, dict):
                raise ElasticError(
                    "Failed to parse update request", status=400, error_type="x_content_parse_exception"
                )
            response = _apply_update(
                index, shard, doc_id, body, op.routing, if_seq_no, if_primary_term, op.wanted
            )
    except ElasticError as exc:
        return {kind: _item_error(op, doc_id, exc)}
    response["status"] = _STATUS[response["result"]]
    return {kind: response}
