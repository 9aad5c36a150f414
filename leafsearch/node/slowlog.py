"""Elasticsearch's search and indexing slow logs, driven by the same index settings.

`index.search.slowlog.threshold.{query,fetch}.{warn,info,debug,trace}` and
`index.indexing.slowlog.threshold.index.*` (time values, `-1` = off, the default) decide whether a
phase or a document write is logged and at which level: the highest level whose threshold the
time reached. Lines are Elasticsearch 8's JSON (ECS) slow log events, one per line, under its
logger names (`index.search.slowlog.query`, `index.search.slowlog.fetch`,
`index.indexing.slowlog.index`); `leafsearch serve --slow-log` says where they go.

What differs, and why: leafsearch times each phase once per request across the shards searched
(`SearchStats.phase` reports it here), where Elasticsearch logs each shard's own phase; so a
search logs one line per index it read, `[index][0]` for the usual single-shard index, `[index]`
with `total_shards` for more. Documents written by `_bulk` are not logged one by one: a bulk
request parses and writes its documents in columns, so there is no per-document time to compare
with a threshold.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from leafsearch.errors import ElasticError
from leafsearch.search.stats import request_phases

if TYPE_CHECKING:
    from leafsearch.node.node import Node

TRACE = 5
logging.addLevelName(TRACE, "TRACE")
#: Elasticsearch's levels, highest first, as Python logging levels.
LEVELS = (("warn", logging.WARNING), ("info", logging.INFO), ("debug", logging.DEBUG), ("trace", TRACE))
_LEVEL_NAMES = {level: name.upper() for name, level in LEVELS}

SEARCH_LOGGERS = {phase: logging.getLogger(f"index.search.slowlog.{phase}") for phase in ("query", "fetch")}
INDEXING_LOGGER = logging.getLogger("index.indexing.slowlog.index")
ALL_LOGGERS = (*SEARCH_LOGGERS.values(), INDEXING_LOGGER)
for _logger in ALL_LOGGERS:
    _logger.setLevel(TRACE)  # the index thresholds choose what is logged, as in Elasticsearch


@dataclass
class SearchOutcome:
    """Filled in by the caller of `timed_search`: the response (for `total_hits`)."""

    response: dict[str, Any] | None = None


@contextmanager
def timed_search(
    node: Node, index_expr: str | None, body: dict[str, Any] | None, opaque_id: str | None
) -> Iterator[SearchOutcome]:
    """Times the phases of the search run inside the block and logs those over their thresholds."""
    outcome = SearchOutcome()
    with request_phases() as times:
        yield outcome
    if times.seconds:
        _log_search(node, index_expr, body, opaque_id, times.seconds, outcome.response)


def _level(settings: dict[str, Any], prefix: str, seconds: float) -> int | None:
    from leafsearch.common.settings import index_setting

    for name, level in LEVELS:
        threshold = index_setting(settings, f"{prefix}.{name}")
        if threshold >= 0 and seconds >= threshold:
            return level
    return None


def _search_indices(node: Node, index_expr: str | None, body: dict[str, Any] | None) -> list[str]:
    try:
        pit = body.get("pit") if isinstance(body, dict) else None
        if index_expr is None and isinstance(pit, dict) and isinstance(pit.get("id"), str):
            held = node.contexts.held(pit["id"], "pit")  # (the search acquired it: no cluster read)
            return [] if held is None else held.indices
        return node.resolve_indices(index_expr, ignore_unavailable=True)
    except ElasticError:
        return []


def _log_search(
    node: Node,
    index_expr: str | None,
    body: dict[str, Any] | None,
    opaque_id: str | None,
    phases: dict[str, float],
    response: dict[str, Any] | None,
) -> None:
    for name in _search_indices(node, index_expr, body):
        index = node.indices.get(name)
        if index is None:
            continue
        for phase, seconds in phases.items():
            level = _level(index.settings, f"index.search.slowlog.threshold.{phase}", seconds)
            if level is None:
                continue
            shard = "[0]" if index.num_shards == 1 else ""
            event = {
                **_common(node, level, SEARCH_LOGGERS[phase].name, "elasticsearch.index_search_slowlog"),
                "elasticsearch.slowlog.id": opaque_id,
                "elasticsearch.slowlog.message": f"[{name}]{shard}",
                "elasticsearch.slowlog.search_type": "QUERY_THEN_FETCH",
                "elasticsearch.slowlog.source": orjson.dumps(body or {}).decode(),
                "elasticsearch.slowlog.stats": "[]",
                "elasticsearch.slowlog.took": format_took(seconds),
                "elasticsearch.slowlog.took_millis": int(seconds * 1000),
                "elasticsearch.slowlog.total_hits": _total_hits(response),
                "elasticsearch.slowlog.total_shards": index.num_shards,
            }
            SEARCH_LOGGERS[phase].log(level, orjson.dumps(event).decode())


def indexing_timed(
    node: Node, index_name: str, doc_id: str | None, routing: str | None, source: bytes, seconds: float
) -> None:
    """One document written by the index/create/update APIs took `seconds`: logged if over a threshold."""
    index = node.indices.get(index_name)
    if index is None:
        return
    level = _level(index.settings, "index.indexing.slowlog.threshold.index", seconds)
    if level is None:
        return
    event = {
        **_common(node, level, INDEXING_LOGGER.name, "elasticsearch.index_indexing_slowlog"),
        "elasticsearch.index.name": index_name,
        "elasticsearch.index.id": index.settings.get("index.uuid"),
        "elasticsearch.slowlog.message": f"[{index_name}/{index.settings.get('index.uuid')}]",
        "elasticsearch.slowlog.id": doc_id,
        "elasticsearch.slowlog.routing": routing,
        "elasticsearch.slowlog.took": format_took(seconds),
        "elasticsearch.slowlog.took_millis": int(seconds * 1000),
    }
    logged = _logged_source(index.settings, source)
    if logged is not None:
        event["elasticsearch.slowlog.source"] = logged
    INDEXING_LOGGER.log(level, orjson.dumps(event).decode())


def _logged_source(settings: dict[str, Any], source: bytes) -> str | None:
    """`index.indexing.slowlog.source`: true (all), false/0 (none) or the first N characters, on one
    line (`index.indexing.slowlog.reformat`, default true) or as sent."""
    from leafsearch.common.settings import index_setting

    limit = index_setting(settings, "index.indexing.slowlog.source")
    if limit == 0:
        return None
    text = source.decode("utf-8", "replace")
    if index_setting(settings, "index.indexing.slowlog.reformat"):
        try:
            text = orjson.dumps(orjson.loads(source)).decode()
        except orjson.JSONDecodeError:
            text = " ".join(text.split())
    return text if limit < 0 else text[:limit]


def _common(node: Node, level: int, logger: str, dataset: str) -> dict[str, Any]:
    now = datetime.now(UTC)
    return {
        "@timestamp": now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z",
        "log.level": _LEVEL_NAMES[level],
        "log.logger": logger,
        "ecs.version": "1.2.0",
        "service.name": "ES_ECS",
        "event.dataset": dataset,
        "fileset.name": "slowlog",
        "elasticsearch.cluster.name": node.cluster_name,
        "elasticsearch.cluster.uuid": node.cluster_uuid,
        "elasticsearch.node.id": node.node_id,
        "elasticsearch.node.name": node.name,
    }


def _total_hits(response: dict[str, Any] | None) -> str:
    total = (response or {}).get("hits", {}).get("total")
    if isinstance(total, dict):
        return f"{total.get('value')}{'+' if total.get('relation') == 'gte' else ''} hits"
    if isinstance(total, int):
        return f"{total} hits"
    return "-1"


def format_took(seconds: float) -> str:
    """A duration as Elasticsearch's TimeValue prints it: `747.3micros`, `10.9ms`, `1.2s`."""
    if seconds < 0.001:
        return f"{_one_decimal(seconds * 1e6)}micros"
    if seconds < 1:
        return f"{_one_decimal(seconds * 1e3)}ms"
    if seconds < 60:
        return f"{_one_decimal(seconds)}s"
    return f"{_one_decimal(seconds / 60)}m"


def _one_decimal(value: float) -> str:
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text
