"""Document writes and realtime reads: index, create, get, delete, update, bulk.

The Node binds these to its `WriteServices` (node.py). Every write is parsed against the mapping before it is
logged, so a value that does not fit its field changes nothing; the translog is fsynced before
the response is returned, so an acknowledged write survives `kill -9`.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.common.rawjson import RawJSON
from leafsearch.common.settings import check_active_shard_count
from leafsearch.common.suggestions import did_you_mean
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
from leafsearch.index.shard import DocState, Shard, SyncPoint
from leafsearch.index.shard_write import (
    IndexColumns,
    ShardWrite,
    ShardWriteOutcome,
    WriteOp,
    WriteOutcome,
    apply_write,
    check_seq_no,
    conflict_extra,
    exists,
)
from leafsearch.index.synthetic_source import is_synthetic, synthesize
from leafsearch.index.versioning import ExternalVersion, parse_versioning
from leafsearch.indices.aliases import single_index, write_target
from leafsearch.request.search_request import parse_fetch_source
from leafsearch.request.search_types import SourceFilter
from leafsearch.scripts.service import Script, StoredScripts
from leafsearch.search.fetch import extract_fields, filter_source
from leafsearch.write.bulk_columns import SimpleBulk, generate_ids, parse_simple
from leafsearch.write.bulk_items import Item, expand, finish, has_error, place, render_successes
from leafsearch.write.bulk_offload import Prepared, PreparedBatch, prepare
from leafsearch.write.bulk_request import BulkOp, parse_bulk

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.write.services import WriteServices

MAX_ID_BYTES = 512


def generate_id() -> str:
    """A 20-character URL-safe id, like Elasticsearch's auto-generated ids."""
    return generate_ids(1)[0]


def _write_index(services: WriteServices, name: str) -> Index:
    """The target of a write, created with default settings when missing (auto-create)."""
    index = services.indices.get(name)
    if index is not None:
        index.check_open()
        return index
    return services.auto_create(name)


def _shards_header(index: Index) -> dict[str, int]:
    replicas = int(index.setting("index.number_of_replicas"))
    return {"total": 1 + replicas, "successful": 1, "failed": 0}


def _check_id(doc_id: str) -> None:
    """An id Elasticsearch takes: at most 512 bytes; an empty one is refused by the index routing
    of an index/create (illegal argument; an update's or delete's never gets here, see
    `_parse_bulk`)."""
    size = len(doc_id.encode())
    if size > MAX_ID_BYTES:
        raise ActionRequestValidation(
            f"id [{doc_id}] is too long, must be no longer than 512 bytes but was: {size}"
        )
    if not doc_id:
        raise IllegalArgument("if _id is specified it must not be empty")
    _check_stored_id(doc_id)


def _check_stored_id(doc_id: str) -> None:
    """An id the segments tell apart from every other: they keep ids as NUL-padded byte strings
    (index/segment.py `to_term_array`), where `a` followed by NUL is `a`. Refused, for every
    write (a delete too), rather than changing another document."""
    if doc_id.endswith("\x00"):
        raise IllegalArgument(f"id [{doc_id}] must not end with the NUL character (U+0000)")


def _conflict_extra(index: Index, shard: Shard) -> dict[str, str]:
    return conflict_extra(_shard_write(index, shard), shard)


def _shard_write(index: Index, shard: Shard, ops: tuple[WriteOp, ...] = (), batch=None) -> ShardWrite:
    return ShardWrite(index.name, index.uuid, shard.shard_id, ops, batch)


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
        parsed = index.parse(source, doc_id, routed=routing is not None)
    op = WriteOp(op_type, doc_id, routing, if_seq_no, if_primary_term, external, auto_id, parsed)  # type: ignore[arg-type]
    return _write_response(index, shard, op, shards_header or _shards_header(index))


def _write_response(index: Index, shard: Shard, op: WriteOp, header: dict[str, int]) -> dict[str, Any]:
    """Apply one operation through the shard write interface; its response, or its refusal raised."""
    (outcome,) = apply_write(shard, _shard_write(index, shard, (op,)))
    if isinstance(outcome, ElasticError):
        raise outcome
    return _outcome_response(index, op.doc_id, outcome, header)


def _outcome_response(
    index: Index, doc_id: str, outcome: WriteOutcome, header: dict[str, int]
) -> dict[str, Any]:
    return {
        "_index": index.name,
        "_id": doc_id,
        "_version": outcome.version,
        "result": outcome.result,
        "_shards": header,
        "_seq_no": outcome.seq_no,
        "_primary_term": outcome.term,
    }


def _after_write(
    services: WriteServices, index: Index, shard: Shard, point: SyncPoint, refresh: str | None, response: dict
) -> None:
    """Make the write durable (an fsync shared with concurrent requests), then honour `?refresh`."""
    shard.sync(point)
    if refresh in ("true", ""):
        shard.refresh()
        response["forced_refresh"] = True
    elif refresh == "wait_for":
        shard.refresh()
    elif refresh not in (None, "false"):
        raise IllegalArgument(f"Unknown value for refresh: [{refresh}].")


def _remote_write(index: Index, shard_id: int, op: WriteOp, refresh: str | None) -> dict[str, Any]:
    """One operation sent to a shard actor (answered after its fsync), then `?refresh`."""
    assert index.remote is not None
    (result,) = index.remote.write([ShardWrite(index.name, index.uuid, shard_id, (op,))])
    if isinstance(result, ElasticError):
        raise result
    (outcome,) = result
    if isinstance(outcome, ElasticError):
        raise outcome
    response = _outcome_response(index, op.doc_id, outcome, _shards_header(index))
    if refresh in ("true", "", "wait_for"):
        index.shards[shard_id].refresh()
        if refresh != "wait_for":
            response["forced_refresh"] = True
    return response


def _remote_read(
    index: Index, shard_id: int, doc_id: str, *, realtime: bool, refresh: bool
) -> tuple[DocState | None, bytes]:
    """A get from a shard actor, as `read_doc` answers it."""
    assert index.remote is not None
    if refresh:
        index.shards[shard_id].refresh()
    read = index.remote.get(shard_id, doc_id, realtime)
    if read is None:
        return None, b""
    return DocState(read.version, read.seq_no, False, None, -1, read.routing), read.source


def _check_refresh(refresh: str | None) -> None:
    if refresh not in (None, "", "true", "false", "wait_for"):
        raise IllegalArgument(f"Unknown value for refresh: [{refresh}].")


def index_doc(
    services: WriteServices,
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
    requested = index_name
    index_name, routing = write_target(
        services.aliases.resolving, index_name, routing, require_alias=require_alias
    )
    index = _write_index(services, index_name)
    _check_stream_op(services, requested, index, op_type)
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    parsed = index.parse(source, doc_id, routed=routing is not None)
    if index.remote is not None:
        op = WriteOp(op_type, doc_id, routing, if_seq_no, if_primary_term, external, auto_id, parsed)  # type: ignore[arg-type]
        return _remote_write(index, shard.shard_id, op, refresh)
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
    _after_write(services, index, shard, point, refresh, response)
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


def _read_index(services: WriteServices, index_name: str) -> Index:
    """The index a single-document read names; an alias must stand for one index."""
    index = services.indices.get(single_index(services.aliases.resolving, index_name))
    if index is None:
        raise IndexNotFound(index_name)
    index.check_open()
    return index


def get_doc(
    services: WriteServices,
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
    index = _read_index(services, index_name)
    _check_routing_required(index, routing, doc_id)
    if doc_id.endswith("\x00"):  # no document has such an id (`_check_stored_id`)
        return None
    shard = index.shard_of(doc_id, routing)
    if index.remote is not None:
        state, source = _remote_read(index, shard.shard_id, doc_id, realtime=realtime, refresh=refresh)
    else:
        with shard.stats.get() as found:
            state, source = read_doc(shard, doc_id, realtime=realtime, refresh=refresh)
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
        "_primary_term": shard.primary_term,
        "found": True,
    }
    if state.routing is not None:
        body["_routing"] = state.routing
    if index.mapping.source_enabled:
        synthetic = is_synthetic(index.mapping, index.settings)
        body["_source"] = RawJSON(synthesize(index.mapping, source) if synthetic else source)
    return body


def read_doc(shard: Shard, doc_id: str, *, realtime: bool, refresh: bool) -> tuple[DocState | None, bytes]:
    """The document's state and source (None when absent), realtime or from the last snapshot."""
    if refresh:
        shard.refresh()
    if not realtime:
        return _get_from_searcher(shard, doc_id)
    with shard.lock:
        shard.check_open()
        shard.recover_if_failed()  # a failed translog may leave operations that are not durable
        state = shard.current(doc_id)
        if not exists(state):
            return None, b""
        return state, shard.get_source(state)


def stored_fields(services: WriteServices, index_name: str, source: Any, names: list[str]) -> dict[str, list]:
    """The values a get shows under `fields` for `stored_fields`: those of the named fields
    mapped with `store: true` (read from the document's source, which holds what was stored),
    printed as the field type prints them."""
    mapping = _read_index(services, index_name).mapping
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
    services: WriteServices,
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
    requested = index_name
    index_name, routing = write_target(services.aliases.resolving, index_name, routing, require_alias=False)
    external = parse_versioning(version, version_type, if_seq_no)
    _check_stored_id(doc_id)
    index = _read_index(services, index_name)
    _check_stream_op(services, requested, index, "delete")
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    if index.remote is not None:
        op = WriteOp("delete", doc_id, None, if_seq_no, if_primary_term, external)
        return _remote_write(index, shard.shard_id, op, refresh)
    with shard.writing() as point:
        response = _apply_delete(index, shard, doc_id, if_seq_no, if_primary_term, external)
    _after_write(services, index, shard, point, refresh, response)
    return response


def _apply_delete(
    index: Index,
    shard: Shard,
    doc_id: str,
    if_seq_no: int | None,
    if_primary_term: int | None,
    external: ExternalVersion | None = None,
) -> dict[str, Any]:
    op = WriteOp("delete", doc_id, None, if_seq_no, if_primary_term, external)
    return _write_response(index, shard, op, _shards_header(index))


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


def _updated_source(
    doc_id: str, body: dict, prior_source: bytes | None, scripted: Scripted | None = None
) -> tuple[bytes | None, str]:
    """(new source, result) of an update request; source None means a no-op (or, with the result
    "deleted", a delete: a script set `ctx.op` to it)."""
    unknown = next((key for key in body if key not in _UPDATE_KEYS), None)
    if unknown is not None:
        raise ElasticError(
            f"[UpdateRequest] unknown field [{unknown}]{did_you_mean(unknown, _UPDATE_FIELDS)}",
            status=400,
            error_type="x_content_parse_exception",
        )
    doc = body.get("doc")
    if scripted is not None:
        if doc is not None:
            raise ActionRequestValidation("can't provide both script and doc")
        return _run_update_script(doc_id, body, prior_source, scripted)
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


@dataclass(frozen=True)
class Scripted:
    """An update's script and what its `ctx` tells it of the document."""

    script: Script
    index: str
    routing: str | None
    version: int | None = None

    def at(self, prior: DocState | None) -> Scripted:
        return Scripted(self.script, self.index, self.routing, prior.version if prior is not None else None)


def _run_update_script(
    doc_id: str, body: dict, prior_source: bytes | None, scripted: Scripted
) -> tuple[bytes | None, str]:
    """Elasticsearch's UpdateHelper with a script: the script changes `ctx._source` and may set
    `ctx.op` (`noop`, `delete`); a missing document takes `upsert` as it is, or runs the script on
    it with `scripted_upsert`."""
    if prior_source is None:
        if "upsert" not in body:
            raise DocumentMissing(f"[{doc_id}]: document missing", extra={"index": "", "shard": "0"})
        if not isinstance(body["upsert"], dict):
            raise ElasticError(
                "[UpdateRequest] failed to parse field [upsert]",
                status=400,
                error_type="x_content_parse_exception",
            )
        if not body.get("scripted_upsert"):
            return _encode(body["upsert"]), "created"
        source, op = orjson.loads(orjson.dumps(body["upsert"])), "create"
    else:
        source, op = orjson.loads(prior_source), "index"
    ctx = {
        "_source": source,
        "op": op,
        "_id": doc_id,
        "_index": scripted.index,
        "_routing": scripted.routing,
        "_version": scripted.version,
        "_now": int(time.time() * 1000),
    }
    op = scripted.script.update(ctx)
    if op in ("noop", "none") or (op == "delete" and prior_source is None):
        return None, "noop"
    if op == "delete":
        return None, "deleted"
    return _encode(ctx["_source"]), "created" if prior_source is None else "updated"


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
    services: WriteServices,
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
    """A partial update. On a local shard it reads and writes under the shard lock, so no
    concurrent write can conflict with it; on a shard actor a concurrent write can, and
    `retry_on_conflict` says how many times to read again.
    `source_filter`: the URL's `_source` options (the body's `_source` wins)."""
    _check_refresh(refresh)
    requested = index_name
    index_name, routing = write_target(
        services.aliases.resolving, index_name, routing, require_alias=require_alias
    )
    _check_stored_id(doc_id)
    index = _write_index(services, index_name)
    _check_stream_op(services, requested, index, "update")
    _check_active_shards(index, wait_for_active_shards)
    _check_routing_required(index, routing, doc_id)
    shard = index.shard_of(doc_id, routing)
    scripted = _scripted(services.scripts, index, body, routing)
    if index.remote is not None:
        return _remote_update(
            index,
            shard,
            doc_id,
            body,
            routing,
            if_seq_no,
            if_primary_term,
            source_filter,
            retry_on_conflict,
            refresh,
            scripted,
        )
    with shard.writing() as point:
        response = _apply_update(
            index, shard, doc_id, body, routing, if_seq_no, if_primary_term, source_filter, scripted
        )
    _after_write(services, index, shard, point, refresh, response)
    return response


def _scripted(scripts: StoredScripts, index: Index, body: dict, routing: str | None) -> Scripted | None:
    """The update's script, compiled (a stored one looked up) before any shard is locked."""
    if "script" not in body:
        return None
    return Scripted(scripts.parse(body["script"]), index.name, routing)


def _apply_update(
    index: Index,
    shard: Shard,
    doc_id: str,
    body: dict,
    routing: str | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
    source_filter: SourceFilter | None = None,
    scripted: Scripted | None = None,
) -> dict[str, Any]:
    """Read, merge and write one update, under the shard lock the caller holds."""
    prior = shard.current(doc_id)
    prior_source = shard.get_source(prior) if exists(prior) else None
    source, result = _updated(
        index, shard, doc_id, body, prior, prior_source, if_seq_no, if_primary_term, scripted
    )
    written = None
    if result == "deleted":
        written = _apply_delete(index, shard, doc_id, None, None)
    elif source is None:
        shard.stats.add(noop_update_total=1)
    else:
        written = _apply_index(
            index,
            shard,
            doc_id,
            source,
            op_type="index",
            routing=routing,
            if_seq_no=None,
            if_primary_term=None,
        )
    return _update_answer(
        index,
        doc_id,
        body,
        routing,
        prior,
        source,
        prior_source,
        result,
        written,
        source_filter,
        shard.primary_term,
    )


def _updated(
    index: Index,
    shard: Any,
    doc_id: str,
    body: dict,
    prior: DocState | None,
    prior_source: bytes | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
    scripted: Scripted | None = None,
) -> tuple[bytes | None, str]:
    """(new source, result) of an update of the document read (`prior_source` None: absent); None
    for a no-op. As Elasticsearch's UpdateHelper, a missing document without an upsert is
    `document_missing_exception` (404) before `if_seq_no` is looked at."""
    if prior_source is not None:
        check_seq_no(_shard_write(index, shard), shard, doc_id, prior, if_seq_no, if_primary_term)
        if not index.mapping.source_enabled:
            raise DocumentSourceMissing(
                f"[{doc_id}]: document source missing", extra=_conflict_extra(index, shard)
            )
    try:
        source, result = _updated_source(
            doc_id, body, prior_source, scripted.at(prior) if scripted is not None else None
        )
    except DocumentMissing as exc:
        exc.extra = _conflict_extra(index, shard)
        raise
    if prior_source is None:  # an upsert: `if_seq_no` has no document to match
        check_seq_no(_shard_write(index, shard), shard, doc_id, prior, if_seq_no, if_primary_term)
    return source, result


def _update_answer(
    index: Index,
    doc_id: str,
    body: dict,
    routing: str | None,
    prior: DocState | None,
    source: bytes | None,
    prior_source: bytes | None,
    result: str,
    written: dict[str, Any] | None,
    source_filter: SourceFilter | None,
    term: int,
) -> dict[str, Any]:
    """An update's response: the write's (None: a no-op; `term`: the shard's primary term), with
    the document as `get` when a `_source` filter fetches it (the body's `_source`, else the
    URL's)."""
    if written is None:  # a no-op; of a missing document when a scripted upsert chose `noop`
        found = prior is not None and prior_source is not None
        response = {
            "_index": index.name,
            "_id": doc_id,
            "_version": prior.version if found else -1,  # type: ignore[union-attr]
            "result": "noop",
            "_shards": {"total": 0, "successful": 0, "failed": 0},
            "_seq_no": prior.seq_no if found else -2,  # type: ignore[union-attr]
            "_primary_term": term if found else 0,
        }
    else:
        response = written
        response["result"] = result
    if "_source" in body:
        source_filter = parse_fetch_source(body["_source"])
    if source_filter is not None and source_filter.fetch:
        response["get"] = _get_result(
            index, response, source if source is not None else prior_source, routing, source_filter
        )
    return response


def _remote_update(
    index: Index,
    shard: Any,
    doc_id: str,
    body: dict,
    routing: str | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
    source_filter: SourceFilter | None,
    retry_on_conflict: int,
    refresh: str | None = None,
    scripted: Scripted | None = None,
) -> dict[str, Any]:
    """An update of a shard actor's document: read (realtime), merge and parse here, then written
    only if the document is still the one read (`if_seq_no` of the read, as Elasticsearch's
    update on a primary is atomic); a document changed in between is read again, up to
    `retry_on_conflict` times, then the conflict is the answer (409)."""
    for attempt in range(retry_on_conflict + 1):
        prior, prior_source = _remote_read(index, shard.shard_id, doc_id, realtime=True, refresh=False)
        found = prior_source if prior is not None else None
        source, result = _updated(
            index, shard, doc_id, body, prior, found, if_seq_no, if_primary_term, scripted
        )
        if result == "deleted":
            op = WriteOp("delete", doc_id, routing, prior.seq_no, shard.primary_term)  # type: ignore[union-attr]
        elif source is None:
            return _update_answer(
                index,
                doc_id,
                body,
                routing,
                prior,
                None,
                found,
                result,
                None,
                source_filter,
                shard.primary_term,
            )
        elif prior is not None:
            parsed = index.parse(source, doc_id, routed=routing is not None)
            op = WriteOp("index", doc_id, routing, prior.seq_no, shard.primary_term, parsed=parsed)
        else:
            parsed = index.parse(source, doc_id, routed=routing is not None)
            op = WriteOp("create", doc_id, routing, parsed=parsed)
        try:
            written = _remote_write(index, shard.shard_id, op, refresh)
        except VersionConflict:
            if attempt == retry_on_conflict:
                raise
            continue
        return _update_answer(
            index,
            doc_id,
            body,
            routing,
            prior,
            source,
            found,
            result,
            written,
            source_filter,
            shard.primary_term,
        )
    raise AssertionError("unreachable")


def _get_result(
    index: Index, response: dict[str, Any], source: bytes | None, routing: str | None, flt: SourceFilter
) -> dict[str, Any]:
    """The `get` of an update response (Elasticsearch's GetResult, embedded): the document as
    written, its source filtered as a get filters it."""
    got: dict[str, Any] = {"_seq_no": response["_seq_no"], "_primary_term": response["_primary_term"]}
    if routing is not None:
        got["_routing"] = routing
    got["found"] = True
    if source is not None and is_synthetic(index.mapping, index.settings):
        source = synthesize(index.mapping, source)
    filtered = filter_source(source, flt) if source is not None and index.mapping.source_enabled else None
    if filtered is not None:
        got["_source"] = RawJSON(filtered)
    return got


# ---- bulk ----------------------------------------------------------------------------------


def _item_error(op: BulkOp, doc_id: str | None, exc: ElasticError) -> dict[str, Any]:
    item: dict[str, Any] = {"_index": op.index, "_id": doc_id, "status": exc.status}
    item["error"] = {key: value for key, value in exc.body()["error"].items() if key != "root_cause"}
    return item


def bulk(
    services: WriteServices,
    body: bytes,
    *,
    index: str | None = None,
    refresh: str | None = None,
    routing: str | None = None,
    wait_for_active_shards: int | str | None = None,
    authorize: Callable[[str], None] | None = None,
    require_alias: bool = False,
    source_filter: SourceFilter | None = None,
    raw_items: bool = False,
) -> dict[str, Any]:
    """`authorize(index)` raises for an index the caller may not write: its items fail, as
    Elasticsearch fails the items of a bulk request on an unauthorized index. An item naming an
    alias goes to its write index; `require_alias` (or the item's own) refuses any other name.
    `source_filter`: the URL's `_source` options, which make updates answer their document (`get`).
    `raw_items`: `items` as one rendered array (`bulk_items.RenderedItems`), for a REST answer.

    A large body that arrives while another request holds the node's indexing slot is split,
    and its documents parsed, in the search workers meanwhile (`bulk_offload.py`). Applying the
    operations (and parsing what the workers did not) takes the slot (`WriteServices.indexing`, one: that
    work holds the interpreter, and several requests doing it at once only slow each other
    down); the fsync and the refresh happen outside it, so one request's fsync overlaps the next
    one's parsing, and requests waiting together share fsyncs."""
    started = time.perf_counter()
    _check_refresh(refresh)
    prepared = prepare(services, body, index, routing, source_filter, require_alias)
    with services.indexing:
        ops, results, touched, answers = _apply_bulk(
            services,
            body,
            index,
            routing,
            wait_for_active_shards,
            authorize,
            require_alias,
            source_filter,
            prepared,
        )
    for collect in answers:  # shard actors' answers, waited for outside the slot
        collect()
    for shards in touched.values():
        for shard, logged in shards.items():
            if logged is None:  # a shard actor answered after its own fsync
                continue
            point, positions = logged
            try:
                shard.sync(point)
            except ElasticError as exc:  # none of this shard's operations is acknowledged
                _fail_items(results, ops, positions, exc)
        if refresh in ("true", "", "wait_for"):
            for shard in shards:
                shard.refresh()
    errors = any(map(has_error, filter(None, results)))  # (None: a position a rendered run covers)
    items = finish(results, raw=raw_items)
    return {"errors": errors, "took": int((time.perf_counter() - started) * 1000), "items": items}


def _fail_items(results: list[Item], ops: list[BulkOp], positions: list[int], exc: ElasticError) -> None:
    """The items at `positions` fail with `exc`, but those that already failed."""
    for pos in positions:
        expand(results, pos)
    for pos in positions:
        if not has_error(results[pos]):
            kind, item = next(iter(results[pos].items()))  # type: ignore[union-attr]
            results[pos] = {kind: _item_error(ops[pos], item.get("_id"), exc)}


def _apply_bulk(
    services: WriteServices,
    body: bytes,
    index: str | None,
    routing: str | None,
    wait_for_active_shards: int | str | None,
    authorize: Callable[[str], None] | None,
    require_alias: bool,
    source_filter: SourceFilter | None = None,
    prepared: Prepared | None = None,
) -> tuple[Sequence[BulkOp], list[Item], dict[str, dict[Shard, _Logged | None]], list[Callable]]:
    """Parse a bulk body (unless a worker did: `prepared`) and apply its operations (logged, not
    yet synced): the operations, the item results so far, per index what each shard logged, and
    the functions that wait for the shard actors' answers and fill in their items.

    A body of simple index/create lines (`SimpleBulk`) is resolved per index name it gives
    (authorization, aliases, routing), not per operation, and applied by column."""
    if prepared is not None:
        ops = prepared.ops
    else:
        ops = parse_simple(body, index, routing) or parse_bulk(body, index, routing, source_filter)
    touched: dict[str, dict[Shard, _Logged | None]] = {}
    answers: list[Callable[[], None]] = []
    results: list[Item] = [{}] * len(ops)
    targets = _bulk_targets(services, ops, authorize, require_alias, results)
    for index_name, group in targets.items():
        entries = None if isinstance(group, _Simple) else group
        try:
            target = _bulk_target(services, index_name, entries)
            _check_active_shards(target, wait_for_active_shards)
        except ElasticError as exc:
            for pos in group.positions if isinstance(group, _Simple) else (pos for pos, _ in group):
                results[pos] = {ops[pos].kind: _item_error(ops[pos], ops[pos].meta.get("_id"), exc)}
            continue
        stream = target.name in services.aliases.backing  # a data stream's: creates only
        shards = touched.setdefault(index_name, {})
        if isinstance(group, _Simple) and target.remote is not None and not stream:
            answers.append(_simple_into_remote(target, ops, group, results, shards))  # type: ignore[arg-type]
            continue
        if isinstance(group, _Simple) and (stream or target.remote is not None):
            entries = [(pos, ops[pos]) for pos in group.positions]
            for _, op in entries:
                op.routing = group.routing
        if stream:
            entries = _stream_creates(services, target, entries, results)  # type: ignore[arg-type]
            if not entries:
                continue
        if target.remote is not None:
            answers.append(_bulk_into_remote(target, ops, entries, results, shards, services.scripts))  # type: ignore[arg-type]
            continue
        batch = prepared.batches.get(target.uuid) if prepared is not None else None
        if entries is None:
            _simple_into(target, ops, group, results, shards, batch)  # type: ignore[arg-type]
        else:
            _bulk_into(target, ops, entries, results, shards, services.scripts, batch)
    return ops, results, touched, answers


@dataclass(slots=True)
class _Simple:
    """A `SimpleBulk`'s operations on one index, in order, and the routing they all take."""

    positions: list[int]
    routing: str | None


def _bulk_targets(
    services: WriteServices,
    ops: Sequence[BulkOp],
    authorize: Callable[[str], None] | None,
    require_alias: bool,
    results: list[Item],
) -> dict[str, list[tuple[int, BulkOp]] | _Simple]:
    """The operations per concrete index they write to (through aliases), in request order; an
    operation the caller may not write, or whose name does not resolve, gets its item error. A
    `SimpleBulk`'s are decided once per index name it gives."""
    targets: dict[str, list[tuple[int, BulkOp]] | _Simple] = {}
    refusals: dict[str, ElasticError | None] = {}  # per name an item gives, the caller's refusal

    def resolve(name: str, routing: str | None, required: bool) -> tuple[str, str | None]:
        if authorize is not None:
            if name not in refusals:
                refusals[name] = _refusal(authorize, name)
            if refusals[name] is not None:
                raise refusals[name]  # type: ignore[misc]
        return write_target(services.aliases.resolving, name, routing, require_alias=required)

    if isinstance(ops, SimpleBulk):
        for name, positions in ops.by_name().items():
            try:
                concrete, routing = resolve(name, ops.routing, require_alias)
            except ElasticError as exc:
                for pos in positions:
                    results[pos] = {ops.kinds[pos]: _item_error(ops[pos], ops.ids[pos] or None, exc)}
                continue
            group = targets.get(concrete)
            if group is None:
                targets[concrete] = _Simple(positions, routing)
            elif isinstance(group, _Simple) and group.routing == routing:  # names of one index
                group.positions = sorted(group.positions + positions)
            else:  # ... with different routings: by operation
                entries = [(pos, ops[pos]) for pos in positions]
                for _, op in entries:
                    op.routing = routing
                if isinstance(group, _Simple):
                    previous = [(pos, ops[pos]) for pos in group.positions]
                    for _, op in previous:
                        op.routing = group.routing
                    group = previous
                targets[concrete] = sorted(group + entries, key=lambda entry: entry[0])
        return targets
    for pos, op in enumerate(ops):
        try:
            concrete, op.routing = resolve(op.index, op.routing, op.meta.get("require_alias", require_alias))
        except ElasticError as exc:
            results[pos] = {op.kind: _item_error(op, op.meta.get("_id"), exc)}
            continue
        targets.setdefault(concrete, []).append((pos, op))  # type: ignore[union-attr]
    return targets


def _refusal(authorize: Callable[[str], None], name: str) -> ElasticError | None:
    try:
        authorize(name)
    except ElasticError as exc:
        return exc
    return None


def _stream_creates(
    services: WriteServices, target: Index, entries: list[tuple[int, BulkOp]], results: list
) -> list[tuple[int, BulkOp]]:
    """The operations on a data stream's backing index it takes; the others' items are errors."""
    kept = []
    for pos, op in entries:
        try:
            _check_stream_op(services, op.index, target, op.kind)
        except ElasticError as exc:
            results[pos] = {op.kind: _item_error(op, op.meta.get("_id"), exc)}
            continue
        kept.append((pos, op))
    return kept


def _check_stream_op(services: WriteServices, requested: str, index: Index, op_type: str) -> None:
    """A data stream takes only `create`s, as Elasticsearch: an index, update or delete through its
    name is refused (one naming a backing index itself is not)."""
    aliases = services.aliases
    through_stream = requested in aliases.streams or (
        index.name in aliases.backing and requested != index.name
    )
    if through_stream and op_type != "create":
        raise IllegalArgument("only write ops with an op_type of create are allowed in data streams")


def _bulk_target(services: WriteServices, name: str, entries: list[tuple[int, BulkOp]] | None) -> Index:
    """The index of a bulk request's operations on `name` (None: index/create ones alone). As in
    Elasticsearch, deletes alone never create a missing index: each of them fails with
    `index_not_found_exception`."""
    if entries is not None and all(op.kind == "delete" for _, op in entries):
        return _read_index(services, name)
    return _write_index(services, name)


#: (position in the request, operation, id, whether the id was generated)
_ShardOp = tuple[int, BulkOp, str, bool]
#: What a bulk request logged into one shard: where to sync to, and the positions of its items
#: (None for a shard actor, which syncs before it answers).
_Logged = tuple[SyncPoint, list[int]]


def _bulk_into(
    index: Index,
    ops: Sequence[BulkOp],
    entries: list[tuple[int, BulkOp]],
    results: list,
    touched: dict[Shard, _Logged | None],
    scripts: StoredScripts,
    prepared: PreparedBatch | None = None,
) -> None:
    """Apply one index's operations, grouped by shard so each shard lock and id lookup is batched.
    `prepared`: the index's documents parsed in a worker, used while the mapping is unchanged.

    A shard's operations go through the shard write interface (index/shard_write.py) in runs:
    the coordinator's part (`_write_ops`: checks and parsing) then the shard's (`apply_write`),
    both under the shard lock, in request order; an update (read, merge, write) runs between
    two runs, so every operation sees the ones before it."""
    header = _shards_header(index)
    for shard, shard_ops in _by_shard(index, entries).items():
        started = time.perf_counter_ns()
        positions = [pos for pos, _, _, _ in shard_ops]
        parsed = rows = None
        if all(op.kind in ("index", "create") for _, op, _, _ in shard_ops):
            parsed, rows = _parsed_batch(index, positions, [op.source for _, op, _, _ in shard_ops], prepared)  # type: ignore[misc]
        with ExitStack() as stack:
            try:
                point = stack.enter_context(shard.writing())
            except IndexClosed as exc:  # closed since the request found the index: nothing applied
                for pos, op, doc_id, _ in shard_ops:
                    results[pos] = {op.kind: _item_error(op, doc_id, exc)}
                continue
            touched[shard] = (point, positions)
            if parsed is not None and all(_plain(op) for _, op, _, _ in shard_ops):
                run = _Run(
                    positions,
                    [op.kind for _, op, _, _ in shard_ops],
                    [doc_id for _, _, doc_id, _ in shard_ops],
                    [auto for _, _, _, auto in shard_ops],
                    [op.routing for _, op, _, _ in shard_ops],
                )
                _column_run(index, shard, ops, run, parsed, rows, header, results)  # type: ignore[arg-type]
            else:
                _apply_runs(index, shard, shard_ops, parsed, rows, header, results, scripts)
        size = sum(len(op.source) for _, op, _, _ in shard_ops if op.source is not None)
        shard.stats.add(bulk_total=1, bulk_time=time.perf_counter_ns() - started, bulk_size=size)


@dataclass(slots=True)
class _Run:
    """Plain index/create operations of one shard by column (`_column_run`): their positions in
    the request, bulk actions, ids (generated where `auto_ids`) and routings."""

    positions: list[int]
    kinds: list[str]
    ids: list[str]
    auto_ids: list[bool]
    routings: list[str | None]

    def take(self, kept: list[int]) -> _Run:
        return _Run(
            *(
                [column[i] for i in kept]
                for column in (self.positions, self.kinds, self.ids, self.auto_ids, self.routings)
            )
        )


def _simple_into(
    index: Index,
    ops: SimpleBulk,
    group: _Simple,
    results: list,
    touched: dict[Shard, _Logged | None],
    prepared: PreparedBatch | None = None,
) -> None:
    """`_bulk_into` for a `SimpleBulk`'s operations on one index, by column: ids generated
    together, routed per shard, parsed and applied as `_column_run`s (one by one, as
    `_bulk_into` does, only where the mapping cannot parse them together)."""
    header = _shards_header(index)
    for shard, run in _simple_runs(index, ops, group).items():
        started = time.perf_counter_ns()
        sources = _run_sources(ops, run)
        parsed, rows = _parsed_batch(index, run.positions, sources, prepared)
        with ExitStack() as stack:
            try:
                point = stack.enter_context(shard.writing())
            except IndexClosed as exc:  # closed since the request found the index: nothing applied
                for pos, doc_id in zip(run.positions, run.ids, strict=True):
                    results[pos] = {ops.kinds[pos]: _item_error(ops[pos], doc_id, exc)}
                continue
            touched[shard] = (point, run.positions)
            if parsed is not None:
                _column_run(index, shard, ops, run, parsed, rows, header, results)
            else:
                shard_ops = [
                    (pos, ops[pos], doc_id, auto)
                    for pos, doc_id, auto in zip(run.positions, run.ids, run.auto_ids, strict=True)
                ]
                for _, op, _, _ in shard_ops:
                    op.routing = group.routing
                _apply_run(index, shard, shard_ops, None, None, header, results)
        shard.stats.add(
            bulk_total=1, bulk_time=time.perf_counter_ns() - started, bulk_size=sum(map(len, sources))
        )


def _simple_runs(index: Index, ops: SimpleBulk, group: _Simple) -> dict[Shard, _Run]:
    """A `SimpleBulk`'s operations on one index as a `_Run` per shard: ids generated together,
    routed per shard."""
    positions = group.positions
    whole = len(positions) == len(ops)
    ids = ops.ids if whole else [ops.ids[pos] for pos in positions]
    auto_ids = list(map(operator.not_, ids))
    if True in auto_ids:
        generated = iter(generate_ids(auto_ids.count(True)))
        ids = [doc_id or next(generated) for doc_id in ids]
    kinds = ops.kinds if whole else [ops.kinds[pos] for pos in positions]
    run = _Run(positions, kinds, ids, auto_ids, [group.routing] * len(ids))
    if index.num_shards == 1 or group.routing is not None:
        return {index.shard_of(ids[0], group.routing): run}
    per_shard: dict[Shard, list[int]] = {}
    for i, doc_id in enumerate(ids):
        per_shard.setdefault(index.shard_of(doc_id, None), []).append(i)
    return {shard: run.take(kept) for shard, kept in per_shard.items()}


def _run_sources(ops: SimpleBulk, run: _Run) -> list[bytes]:
    return ops.sources if len(run.positions) == len(ops) else [ops.sources[pos] for pos in run.positions]


def _apply_runs(
    index: Index,
    shard: Shard,
    shard_ops: list[_ShardOp],
    parsed: ParsedBatch | None,
    rows: list[int] | None,
    header: dict[str, int],
    results: list,
    scripts: StoredScripts,
) -> None:
    """A shard's operations in runs of index, create and delete operations (`_apply_run`),
    each update (read, merge, write) between two runs."""
    run: list[_ShardOp] = []
    for shard_op in shard_ops:
        if shard_op[1].kind != "update":
            run.append(shard_op)
            continue
        _apply_run(index, shard, run, None, None, header, results)
        run = []
        pos, op, doc_id, _ = shard_op
        results[pos] = _bulk_update(index, shard, op, doc_id, scripts)
    _apply_run(index, shard, run, parsed, rows, header, results)


def _parsed_batch(
    index: Index, positions: list[int], sources: list[bytes], prepared: PreparedBatch | None
) -> tuple[ParsedBatch | None, list[int]]:
    """A shard's index/create documents (at these positions of the request) parsed together, and
    the row of each: from the worker's batch while the mapping is at the version it was parsed
    against (a batch parses each document alone, so the rows of a larger batch hold what this
    shard's own would), else parsed here (None: one by one). A data stream's backing index parses
    here: its documents need an `@timestamp`, which `Index.parse_batch` checks."""
    if prepared is not None and index.data_stream is None and index.mapping.version == prepared.version:
        rows = list(map(prepared.row_of.get, positions))
        if None not in rows:
            return prepared.batch, rows  # type: ignore[return-value]
    return index.parse_batch(sources), list(range(len(sources)))


def _simple_into_remote(
    index: Index,
    ops: SimpleBulk,
    group: _Simple,
    results: list,
    touched: dict[Any, _Logged | None],
) -> Callable[[], None]:
    """`_simple_into` for an index on shard actors: each shard's run parsed here and sent by
    column (`_column_write`: no object per operation on either side), every shard's write at
    once, one call per machine; the function that waits for the answers (each after its
    shard's fsync) and fills in their items. A run the mapping cannot parse together goes
    operation by operation (`_write_ops`)."""
    header = _shards_header(index)
    sent: list[tuple[_Answer, ShardWrite]] = []
    for shard, run in _simple_runs(index, ops, group).items():
        touched[shard] = None
        sources = _run_sources(ops, run)
        batch = index.parse_batch(sources)
        if batch is not None:
            written = _column_write(index, shard, ops, run, batch, list(range(len(sources))), results)
            if written is not None:
                sent.append((partial(_column_items, index, ops, written[0], header, results), written[1]))
            continue
        shard_ops = [
            (pos, ops[pos], doc_id, auto)
            for pos, doc_id, auto in zip(run.positions, run.ids, run.auto_ids, strict=True)
        ]
        for _, op, _, _ in shard_ops:
            op.routing = group.routing
        accepted = _write_ops(index, shard_ops, None, results)
        if accepted:
            write = _shard_write(index, shard, tuple(w for _, _, w in accepted))
            sent.append((_op_items(index, accepted, results, header), write))
    return _remote_items(index, sent)


def _bulk_into_remote(
    index: Index,
    ops: Sequence[BulkOp],
    entries: list[tuple[int, BulkOp]],
    results: list,
    touched: dict[Any, _Logged | None],
    scripts: StoredScripts,
) -> Callable[[], None]:
    """One index's operations on its shard actors: the coordinator's part here (`_write_ops`;
    a shard's plain index/create operations by column, `_column_write`), then every shard's
    write sent at once, each answered after its fsync; the function that waits for those
    answers (outside the node's indexing slot) and fills in their items. A shard whose
    operations hold updates is written here, in request order: its runs of other operations,
    and each update (read, merge, conditional write) between them."""
    assert index.remote is not None
    header = _shards_header(index)
    sent: list[tuple[_Answer, ShardWrite]] = []
    with_updates = []
    for shard, shard_ops in _by_shard(index, entries).items():
        touched[shard] = None
        if any(op.kind == "update" for _, op, _, _ in shard_ops):
            with_updates.append((shard, shard_ops))
            continue
        batch = None
        if all(op.kind in ("index", "create") for _, op, _, _ in shard_ops):
            batch = index.parse_batch([op.source for _, op, _, _ in shard_ops])  # type: ignore[misc]
        if batch is not None and all(_plain(op) for _, op, _, _ in shard_ops):
            run = _Run(
                [pos for pos, _, _, _ in shard_ops],
                [op.kind for _, op, _, _ in shard_ops],
                [doc_id for _, _, doc_id, _ in shard_ops],
                [auto for _, _, _, auto in shard_ops],
                [op.routing for _, op, _, _ in shard_ops],
            )
            written = _column_write(index, shard, ops, run, batch, list(range(len(shard_ops))), results)
            if written is not None:
                sent.append((partial(_column_items, index, ops, written[0], header, results), written[1]))
            continue
        accepted = _write_ops(index, shard_ops, batch, results)
        if accepted:
            write = _shard_write(index, shard, tuple(w for _, _, w in accepted), batch)
            sent.append((_op_items(index, accepted, results, header), write))
    collect = _remote_items(index, sent)
    for shard, shard_ops in with_updates:
        run_ops: list[_ShardOp] = []
        for shard_op in [*shard_ops, None]:
            if shard_op is not None and shard_op[1].kind != "update":
                run_ops.append(shard_op)
                continue
            accepted = _write_ops(index, run_ops, None, results)
            if accepted:
                write = _shard_write(index, shard, tuple(w for _, _, w in accepted))
                _remote_items(index, [(_op_items(index, accepted, results, header), write)])()
            run_ops = []
            if shard_op is not None:
                pos, op, doc_id, _ = shard_op
                results[pos] = _bulk_update(index, shard, op, doc_id, scripts)
    return collect


#: What fills in a shard write's items from its answer (its outcomes, or the error that failed it).
_Answer = Callable[[ShardWriteOutcome | ElasticError], None]


def _remote_items(index: Index, sent: list[tuple[_Answer, ShardWrite]]) -> Callable[[], None]:
    """Send shard writes to their actors at once; the function that waits for their answers and
    fills in their items."""
    assert index.remote is not None
    pending = index.remote.send([write for _, write in sent])

    def collect() -> None:
        for (fill, _), answer in zip(sent, pending(), strict=True):
            fill(answer)

    return collect


def _op_items(
    index: Index, accepted: list[tuple[int, BulkOp, WriteOp]], results: list, header: dict[str, int]
) -> _Answer:
    """Fills in the items of a shard write of `WriteOp`s (`_write_ops`' accepted) from its answer."""

    def fill(answer: ShardWriteOutcome | ElasticError) -> None:
        for i, (pos, op, wop) in enumerate(accepted):
            outcome = answer if isinstance(answer, ElasticError) else answer[i]
            results[pos] = _bulk_item(index, op, wop.doc_id, outcome, header)

    return fill


def _by_shard(index: Index, entries: list[tuple[int, BulkOp]]) -> dict[Shard, list[_ShardOp]]:
    """An index's operations by the shard their id (generated when absent) routes to."""
    per_shard: dict[Shard, list[_ShardOp]] = {}
    for pos, op in entries:
        doc_id = op.meta.get("_id")
        auto_id = doc_id is None
        if auto_id:
            doc_id = generate_id()
        per_shard.setdefault(index.shard_of(doc_id, op.routing), []).append((pos, op, doc_id, auto_id))
    return per_shard


def _apply_run(
    index: Index,
    shard: Shard,
    run: list[_ShardOp],
    batch: ParsedBatch | None,
    rows: list[int] | None,
    header: dict[str, int],
    results: list,
) -> None:
    """Index, create and delete operations through the shard write interface; their items.
    `batch`: the run's documents parsed together, operation i at row `rows[i]`."""
    if not run:
        return
    accepted = _write_ops(index, run, batch, results, rows)
    write = _shard_write(index, shard, tuple(w for _, _, w in accepted), batch)
    for (pos, op, wop), outcome in zip(accepted, apply_write(shard, write), strict=True):
        results[pos] = _bulk_item(index, op, wop.doc_id, outcome, header)


def _plain(op: BulkOp) -> bool:
    """An index/create without `if_seq_no`, `if_primary_term` or an external version."""
    return op.external is None and "if_seq_no" not in op.meta and "if_primary_term" not in op.meta


def _column_run(
    index: Index,
    shard: Shard,
    ops: Sequence[BulkOp],
    run: _Run,
    batch: ParsedBatch,
    rows: list[int],
    header: dict[str, int],
    results: list,
) -> None:
    """Plain index/create operations of one shard (`_plain`), checked, applied and answered by
    column (`IndexColumns`, `_column_write`, `_column_items`). `ops[pos]`: the operation at a
    position, for an item that is not a success."""
    written = _column_write(index, shard, ops, run, batch, rows, results)
    if written is not None:
        run, write = written
        _column_items(index, ops, run, header, results, apply_write(shard, write))


def _column_write(
    index: Index,
    shard: Shard,
    ops: Sequence[BulkOp],
    run: _Run,
    batch: ParsedBatch,
    rows: list[int],
    results: list,
) -> tuple[_Run, ShardWrite] | None:
    """`_column_run`'s shard write: the ids' and routing's checks for all at once (one by one
    only for those that fail, which get their item error), and the run of those that passed
    (None: none did)."""
    ids = run.ids
    if (
        not (min(map(len, ids)) > 0 and max(map(len, ids)) <= MAX_ID_BYTES // 4)
        or "\x00" in "".join(ids)
        or (index.mapping.routing_required and None in run.routings)
    ):
        kept = []
        for i, (pos, doc_id, routing) in enumerate(zip(run.positions, ids, run.routings, strict=True)):
            try:
                _check_id(doc_id)
                _check_routing_required(index, routing, doc_id)
            except ElasticError as exc:
                results[pos] = {run.kinds[i]: _item_error(ops[pos], doc_id, exc)}
                continue
            kept.append(i)
        run, rows = run.take(kept), [rows[i] for i in kept]
        ids = run.ids
        if not ids:
            return None
    creates = list(map(operator.or_, map("create".__eq__, run.kinds), run.auto_ids))
    columns = IndexColumns(ids, run.routings, creates, run.auto_ids, rows)
    return run, ShardWrite(index.name, index.uuid, shard.shard_id, (), batch, columns)


def _column_items(
    index: Index,
    ops: Sequence[BulkOp],
    run: _Run,
    header: dict[str, int],
    results: list,
    outcomes: ShardWriteOutcome | ElasticError,
) -> None:
    """The items of `_column_write`'s run from its outcomes (an error: the whole write's, each
    operation's item): the successes' rendered together."""
    if isinstance(outcomes, ElasticError):
        for pos, doc_id in zip(run.positions, run.ids, strict=True):
            results[pos] = {ops[pos].kind: _item_error(ops[pos], doc_id, outcomes)}
        return
    refused = getattr(outcomes, "refused", None)
    if refused is None or refused:  # per operation: an id twice in the run, or conflicts
        for pos, doc_id, outcome in zip(run.positions, run.ids, outcomes, strict=True):
            results[pos] = _bulk_item(index, ops[pos], doc_id, outcome, header)
        return
    rendered = render_successes(
        index.name,
        header,
        run.kinds,
        run.ids,
        outcomes.versions,  # type: ignore[union-attr]
        outcomes.seq_nos,  # type: ignore[union-attr]
        outcomes.updated,  # type: ignore[union-attr]
        outcomes.term,  # type: ignore[union-attr]
    )
    place(results, run.positions, rendered)


def _write_ops(
    index: Index,
    shard_ops: list[_ShardOp],
    batch: ParsedBatch | None,
    results: list,
    rows: list[int] | None = None,
) -> list[tuple[int, BulkOp, WriteOp]]:
    """The coordinator's part of a shard's bulk operations: the checks the request alone decides
    (id, required routing) and the parsing (unless `batch` parsed them together: operation i at
    row `rows[i]`, or in the ops' order); a refused operation gets its item error and is not sent."""
    accepted = []
    for i, (pos, op, doc_id, auto_id) in enumerate(shard_ops):
        row = rows[i] if rows is not None else i
        meta = op.meta
        try:
            if op.kind != "delete":
                _check_id(doc_id)
            else:
                _check_stored_id(doc_id)
            _check_routing_required(index, op.routing, doc_id)
            kind = "delete" if op.kind == "delete" else _index_op_type(op, auto_id)
            parsed = None
            if kind != "delete" and batch is None:
                parsed = index.parse(op.source, doc_id, routed=op.routing is not None)  # type: ignore[arg-type]
            wop = WriteOp(
                kind,  # type: ignore[arg-type]
                doc_id,
                op.routing if kind != "delete" else None,
                meta.get("if_seq_no"),
                meta.get("if_primary_term"),
                op.external,
                auto_id,
                parsed,
                row if batch is not None else None,
            )
        except ElasticError as exc:
            results[pos] = {op.kind: _item_error(op, doc_id, exc)}
            continue
        accepted.append((pos, op, wop))
    return accepted


def _bulk_item(
    index: Index, op: BulkOp, doc_id: str, outcome: WriteOutcome | ElasticError, header: dict[str, int]
) -> dict[str, Any]:
    """A bulk item from a shard's outcome."""
    if isinstance(outcome, ElasticError):
        return {op.kind: _item_error(op, doc_id, outcome)}
    response = _outcome_response(index, doc_id, outcome, header)
    response["status"] = _STATUS[outcome.result]
    return {op.kind: response}


def _index_op_type(op: BulkOp, auto_id: bool) -> str:
    return "create" if op.kind == "create" or auto_id else "index"


_STATUS = {"created": 201, "updated": 200, "deleted": 200, "not_found": 404, "noop": 200}


def _bulk_update(index: Index, shard: Any, op: BulkOp, doc_id: str, scripts: StoredScripts) -> dict[str, Any]:
    """A bulk update item (read, merge and write under the shard lock the caller holds; on a
    shard actor, a conditional write of what was read)."""
    meta = op.meta
    try:
        _check_id(doc_id)
        _check_routing_required(index, op.routing, doc_id)
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
        if_seq_no, if_primary_term = meta.get("if_seq_no"), meta.get("if_primary_term")
        scripted = _scripted(scripts, index, body, op.routing)
        if index.remote is not None:
            retries = int(meta.get("retry_on_conflict", 0))
            response = _remote_update(
                index,
                shard,
                doc_id,
                body,
                op.routing,
                if_seq_no,
                if_primary_term,
                op.wanted,
                retries,
                None,
                scripted,
            )
        else:
            response = _apply_update(
                index, shard, doc_id, body, op.routing, if_seq_no, if_primary_term, op.wanted, scripted
            )
    except ElasticError as exc:
        return {op.kind: _item_error(op, doc_id, exc)}
    response["status"] = _STATUS[response["result"]]
    return {op.kind: response}
