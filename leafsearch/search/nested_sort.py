"""Sorting by a field of `nested` objects (`sort: [{"c.n": {"nested": {"path": "c", ...}}}]`).

A document's values of such a sort are those of its objects under the path that pass the
sort's `filter` (the first `max_children` of them when set); the sort's `mode` picks among them,
as Elasticsearch's nested sort does. They are gathered once per segment into a column on the
segment's own documents (children's values moved onto their parents, by the parents array), kept
by the segment under a key naming the sort (`Segment.hold_derived`), so every sort path
(sort orders, `search_after`, global ordinals) reads it as it reads a field of the documents.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson

from leafsearch.errors import QueryShardError
from leafsearch.index.columns import DocValues, KeywordColumn, NumericColumn
from leafsearch.index.searcher import SegmentView
from leafsearch.index.segment import build_doc_values
from leafsearch.request.search_types import SortSpec
from leafsearch.search.query import executor, planner
from leafsearch.search.query.nested_queries import check_nested_path, nested_level


def column_key(spec: SortSpec) -> str:
    """The name the sort's column goes by in a segment: its field, or for a nested sort a key no
    mapped field can have (a NUL byte) that names everything the column depends on."""
    nested = spec.nested
    if nested is None:
        return spec.field
    described = [spec.field, nested.path, repr(nested.filter), nested.max_children]
    return "\0nested-sort\0" + orjson.dumps(described).decode()


def check_sort_field(spec: SortSpec, targets: list[Any]) -> None:
    """Elasticsearch's refusals: a nested sort whose path is not `nested`; a field inside nested
    objects sorted without the `nested` option (unless its values are in the root too)."""
    for target in targets:
        mapping = target.mapping
        if spec.nested is not None:
            ctx = _context(target)
            check_nested_path(ctx, spec.nested.path, ignore_unmapped=False)
            continue
        parent = _nested_parent(mapping, spec.field)
        if parent is not None and not _in_root(mapping, parent):
            raise QueryShardError(
                f"it is mandatory to set the [nested] context on the nested sort field: [{spec.field}].",
                index=target.index.name,
                index_uuid=target.index.uuid,
            )


def _nested_parent(mapping: Any, field: str) -> str | None:
    found = [p for p in mapping.nested_paths if field.startswith(p + ".")]
    return max(found, key=len) if found else None


def _in_root(mapping: Any, path: str) -> bool:
    params = mapping.nested_paths[path].params
    top = "." not in path
    return bool(params.get("include_in_root") or (top and params.get("include_in_parent")))


@contextmanager
def held_columns(
    spec: SortSpec, targets: list[Any], seg_docs: list[tuple[int, SegmentView, np.ndarray]]
) -> Iterator[None]:
    """Each segment of `seg_docs` holds its column of the nested sort `spec` (built once per
    segment) until the block ends: no other request's column pushes it out meanwhile."""
    key = column_key(spec)
    contexts: dict[int, Any] = {}
    held: list[Any] = []
    try:
        for ti, view, _ in seg_docs:
            segment = view.segment
            if ti not in contexts and not segment.has_derived_column(key):
                contexts[ti] = _context(targets[ti])
            ctx = contexts.get(ti)
            segment.hold_derived(key, lambda view=view, ctx=ctx: _column(spec, view, ctx))
            held.append(segment)
        yield
    finally:
        for segment in held:
            segment.release_derived(key)


def _context(target: Any) -> Any:
    from leafsearch.search.hitlist import shard_query_context  # it imports this module

    return shard_query_context(target, int(time.time() * 1000), False)


def _column(spec: SortSpec, view: SegmentView, ctx: Any) -> KeywordColumn | NumericColumn | None:
    """The sort's values of the segment's documents: their children's, filtered."""
    nested = spec.nested
    assert nested is not None
    level = nested_level(ctx, nested.path)
    found = level.children.get(view.segment)
    if found is None:
        return None
    children, parents = found
    col = children.segment.column(spec.field)
    if not isinstance(col, KeywordColumn | NumericColumn):
        return None
    keep = np.ones(children.max_doc, dtype=bool)
    if nested.filter is not None:
        plan = planner.plan(nested.filter, level.ctx)
        keep &= executor.run(plan, children, level.ctx, False, 1.0)[0]
    if nested.max_children is not None:
        rank = np.arange(len(parents)) - np.searchsorted(parents, parents, side="left")
        keep &= rank < nested.max_children
    dv = col.ords if isinstance(col, KeywordColumn) else col.doc_values
    child_docs, values = dv.flat
    chosen = keep[child_docs]
    keyword = isinstance(col, KeywordColumn)
    max_doc = view.max_doc
    arrays = build_doc_values(
        parents[child_docs[chosen]], np.asarray(values)[chosen], max_doc, dedupe=keyword
    )
    present = arrays.get("present")
    moved = DocValues(
        arrays["values"],
        max_doc,
        offsets=arrays.get("offsets"),
        present=None if present is None else np.unpackbits(present, count=max_doc).astype(bool),
    )
    return KeywordColumn(col.terms, moved) if keyword else NumericColumn(col.kind, moved)
