"""Stored scripts in searches: a script given as `{"id": ..., "params": ...}` (in a `script` or
`script_score` query, `script_fields`, a `_script` sort, an aggregation) runs the source stored
under that id.

The request layer parses such a script into a `ScriptSpec` with `stored_id` and no source; the
coordinator reads the sources in here (and into the aggregations' JSON, which shards parse),
once per request and before anything runs, so shards and
search workers see inline scripts only, and a scroll or PIT walk keeps the source its first page
ran even if the stored script is replaced meanwhile. A missing id is Elasticsearch's 404
`resource_not_found_exception`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from leafsearch.errors import ElasticError
from leafsearch.request.query_dsl import (
    Query,
    ScriptQuery,
    ScriptScore,
    ScriptSpec,
    queries_within,
    replace_queries,
)
from leafsearch.request.search_types import SearchRequest

Lookup = Callable[[str], dict[str, Any] | None]


def resolve_stored_scripts(lookup: Lookup, request: SearchRequest) -> SearchRequest:
    """`request` with each stored script's source read in; the request itself when it names
    none. O(query nodes + sorts + script fields)."""
    changes: dict[str, Any] = {}
    query = _query(lookup, request.query)
    if query is not request.query:
        changes["query"] = query
    if request.post_filter is not None:
        post_filter = _query(lookup, request.post_filter)
        if post_filter is not request.post_filter:
            changes["post_filter"] = post_filter
    if any(spec.stored_id is not None for _, spec, _ in request.script_fields):
        changes["script_fields"] = tuple(
            (name, inline(lookup, spec), ignore) for name, spec, ignore in request.script_fields
        )
    if any(s.script is not None and s.script.stored_id is not None for s in request.sort):
        changes["sort"] = [
            replace(s, script=inline(lookup, s.script)) if s.script is not None else s for s in request.sort
        ]
    if request.aggs is not None and _stored_in_aggs(request.aggs):
        changes["aggs"] = _aggs(lookup, request.aggs)
    rescore = tuple(replace(r, query=_query(lookup, r.query)) for r in request.rescore)
    if any(new.query is not old.query for new, old in zip(rescore, request.rescore, strict=True)):
        changes["rescore"] = rescore
    return replace(request, **changes) if changes else request


def inline(lookup: Lookup, spec: ScriptSpec) -> ScriptSpec:
    """`spec` with its stored script's source (itself when inline)."""
    if spec.stored_id is None:
        return spec
    stored = lookup(spec.stored_id)
    if stored is None:
        raise ElasticError(
            f"unable to find script [{spec.stored_id}] in cluster state",
            status=404,
            error_type="resource_not_found_exception",
        )
    return ScriptSpec(stored["source"], spec.params_json)


def _stored_query(node: Query) -> bool:
    return isinstance(node, ScriptQuery | ScriptScore) and node.script.stored_id is not None


def _query(lookup: Lookup, query: Query) -> Query:
    if not any(_stored_query(q) for q in queries_within(query)):
        return query

    def swap(node: Query) -> Query | None:
        if isinstance(node, ScriptQuery):
            return replace(node, script=inline(lookup, node.script))
        if isinstance(node, ScriptScore):
            return replace(node, query=replace_queries(node.query, swap), script=inline(lookup, node.script))
        return None

    return replace_queries(query, swap)


#: The keys of an aggregation's object that hold its sub-aggregations.
_SUBS = ("aggs", "aggregations")


def _stored_json(script: Any) -> bool:
    return (
        isinstance(script, dict) and "id" in script and isinstance(script["id"], str) and "lang" not in script
    )


def _script_sorts(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The `_script` sorts of an aggregation's `sort` (`top_hits`)."""
    sort = options.get("sort")
    entries = sort if isinstance(sort, list) else [sort]
    return [e["_script"] for e in entries if isinstance(e, dict) and isinstance(e.get("_script"), dict)]


def _names_stored(options: Any) -> bool:
    if not isinstance(options, dict):
        return False
    sorts = _script_sorts(options)
    return _stored_json(options.get("script")) or any(_stored_json(s.get("script")) for s in sorts)


def _stored_in_aggs(aggs: Any) -> bool:
    """Whether an aggregation of the tree (the request's JSON) names a stored script."""
    stack = [aggs]
    while stack:
        level = stack.pop()
        if not isinstance(level, dict):
            continue
        for entry in level.values():
            if not isinstance(entry, dict):
                continue
            for key, options in entry.items():
                if key in _SUBS:
                    stack.append(options)
                elif _names_stored(options):
                    return True
    return False


def _inlined(lookup: Lookup, script: Any) -> Any:
    """A stored script's JSON as the inline script of its source (others as they are: shards
    parse and refuse them as they would have)."""
    if not _stored_json(script):
        return script
    source = inline(lookup, ScriptSpec("", b"{}", script["id"])).source
    return {**{k: v for k, v in script.items() if k != "id"}, "source": source}


def _options(lookup: Lookup, options: dict[str, Any]) -> dict[str, Any]:
    out = dict(options)
    if "script" in out:
        out["script"] = _inlined(lookup, out["script"])
    if _script_sorts(options):
        sort = options["sort"]
        entries = sort if isinstance(sort, list) else [sort]
        rebuilt = [
            {**e, "_script": {**e["_script"], "script": _inlined(lookup, e["_script"].get("script"))}}
            if isinstance(e, dict) and isinstance(e.get("_script"), dict)
            else e
            for e in entries
        ]
        out["sort"] = rebuilt if isinstance(sort, list) else rebuilt[0]
    return out


def _aggs(lookup: Lookup, aggs: dict[str, Any]) -> dict[str, Any]:
    """The tree with each stored script as the inline script of its source and params."""
    out: dict[str, Any] = {}
    for name, entry in aggs.items():
        if not isinstance(entry, dict):
            out[name] = entry
            continue
        rebuilt: dict[str, Any] = {}
        for key, options in entry.items():
            if key in _SUBS and isinstance(options, dict):
                rebuilt[key] = _aggs(lookup, options)
            elif _names_stored(options):
                rebuilt[key] = _options(lookup, options)
            else:
                rebuilt[key] = options
        out[name] = rebuilt
    return out
