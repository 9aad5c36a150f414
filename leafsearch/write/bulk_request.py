"""A bulk request's body split into typed operations (`parse_bulk`).

Nothing here reads the node's state: the same function runs in the server process or, for a large
body, in a search worker process (`bulk_offload.py`), and a malformed body fails there with the
very error it gets here.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import orjson

from leafsearch.errors import ActionRequestValidation, ElasticError, IllegalArgument
from leafsearch.index.versioning import ExternalVersion, parse_versioning
from leafsearch.request.date_math_names import resolve_expression
from leafsearch.request.search_request import parse_fetch_source
from leafsearch.request.search_types import SourceFilter
from leafsearch.write.bulk_metadata import typed_metadata

_BULK_ACTIONS = ("index", "create", "update", "delete")
_BULK_META = frozenset(
    {
        "_index",
        "_id",
        "routing",
        "_routing",
        "if_seq_no",
        "if_primary_term",
        "op_type",
        "pipeline",
        "require_alias",
        "retry_on_conflict",
        "version",
        "version_type",
        "dynamic_templates",
        "require_data_stream",
        "_source",
        "list_executed_pipelines",
    }
)


@dataclass(slots=True)
class BulkOp:
    """One action of a bulk request; `line` is its 1-based line number, for error messages."""

    kind: str
    meta: dict[str, Any]
    line: int
    index: str
    routing: str | None
    source: bytes | None
    external: ExternalVersion | None = None  # `version` with `version_type` external(_gte)
    wanted: SourceFilter | None = None  # an update's `_source`: answer the document as `get`


def _malformed(line_no: int, message: str) -> IllegalArgument:
    return IllegalArgument(f"Malformed action/metadata line [{line_no}], {message}")


#: The action line most bulk bodies repeat: `{"index":{}}`, `{"create":{"_id":"1"}}`, with
#: `_index` before `_id`; nothing to escape in the values (ASCII lines only).
_SIMPLE = re.compile(
    rb'\{"(index|create)":\{(?:"_index":"([^"\\]*)"(,)?)?(?:"_id":"([^"\\]*)")?\}\}'
).fullmatch


def _simple_action(line: bytes) -> tuple[str, dict[str, Any]] | None:
    """The action and parameters of a simple action line without decoding it as JSON (None: any
    other line), as `_action` would type them."""
    found = _SIMPLE(line) if line.isascii() else None
    if found is None:
        return None
    kind, index, comma, doc_id = found.groups()
    if (comma is not None) != (index is not None and doc_id is not None):
        return None  # a comma missing or left over: `_action` refuses the line
    meta: dict[str, Any] = {}
    if index is not None:
        meta["_index"] = index.decode()
    if doc_id is not None:
        meta["_id"] = doc_id.decode()
    return kind.decode(), meta


def _action(line: bytes, i: int) -> tuple[str, dict[str, Any]]:
    """An action line's action and its typed parameters; a malformed one fails the request."""
    try:
        action = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ElasticError(
            f"Malformed action/metadata line [{i}], expected a simple value for field [...] but found "
            f"invalid JSON: {exc}",
            status=400,
            error_type="illegal_argument_exception",
        ) from None
    if type(action) is not dict:
        raise _malformed(i, "expected START_OBJECT or END_OBJECT but found [VALUE_STRING]")
    if not action:  # BulkRequestParser finds the object's end where it wants the action's name
        raise _malformed(i, "expected FIELD_NAME but found [END_OBJECT]")
    if len(action) != 1:
        raise _malformed(i, "expected field [create], [delete], [index] or [update] but found more than one")
    ((kind, meta),) = action.items()
    if kind not in _BULK_ACTIONS:
        raise _malformed(i, f"expected field [create], [delete], [index] or [update] but found [{kind}]")
    if type(meta) is not dict:
        raise _malformed(i, "expected START_OBJECT but found [VALUE_STRING]")
    if not meta.keys() <= _BULK_META:
        unknown = next(key for key in meta if key not in _BULK_META)
        raise IllegalArgument(f"Action/metadata line [{i}] contains an unknown parameter [{unknown}]")
    meta = typed_metadata(i, meta)
    if kind == "index" and "op_type" in meta:
        # BulkRequestParser builds an index action with `op_type: create` as a create: its
        # item is answered under `create`.
        kind = meta["op_type"].lower()
        if kind not in ("index", "create"):
            raise IllegalArgument(f"opType must be 'create' or 'index', found: [{meta['op_type']}]")
    return kind, meta


def parse_bulk(
    body: bytes,
    default_index: str | None,
    default_routing: str | None,
    default_source: SourceFilter | None = None,
) -> list[BulkOp]:
    """Split the NDJSON body into operations; a malformed action line fails the whole request.
    Date math in item index names (`<logs-{now/d}>`) resolves at one `now` for the request; an
    update's `_source` is its action line's, else the request's (its body's wins over both)."""
    bulk_now = int(time.time() * 1000)
    lines = body.split(b"\n")
    ops: list[BulkOp] = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        i += 1
        if not line or line.isspace():
            continue
        simple = _simple_action(line)
        kind, meta = simple if simple is not None else _action(line, i)
        line_no = i
        source = None
        if kind != "delete":
            while i < n and (not lines[i] or lines[i].isspace()):
                i += 1
            if i >= n:
                raise ActionRequestValidation("The bulk request must be terminated by a newline [\\n]")
            source = lines[i].strip()
            i += 1
        index = meta.get("_index", default_index)
        if index is None:
            raise ActionRequestValidation("index is missing")
        if index.startswith("<"):
            index = resolve_expression(index, bulk_now)
        routing = meta.get("routing", meta.get("_routing", default_routing))
        # What BulkRequest.validate refuses for the whole request, item by item.
        if kind in ("update", "delete") and not meta.get("_id"):
            raise ActionRequestValidation("id is missing")
        external = wanted = None
        if kind != "update":
            external = parse_versioning(meta.get("version"), meta.get("version_type"), meta.get("if_seq_no"))
        else:
            wanted = parse_fetch_source(meta["_source"]) if "_source" in meta else default_source
        ops.append(BulkOp(kind, meta, line_no, index, routing, source, external, wanted))
    if body and not body.endswith(b"\n") and ops:
        raise IllegalArgument("The bulk request must be terminated by a newline [\\n]")
    return ops
