"""A seeded fuzzer over every endpoint of the route table, against a real server process.

Requests are drawn from every route of `leafsearch.rest.routes.ROUTES`: malformed and truncated
JSON, wrong types, NaN, huge and negative numbers, deep nesting, long strings, bad time values,
forged scroll and PIT ids, bad index names, bad bulk lines, unknown parameters, and valid search,
aggregation and bulk bodies with one value mutated. The test passes when no answer is a 5xx, every
error body has Elasticsearch's shape (`error.type`, `error.reason`, `error.root_cause`, and a
`status` equal to the HTTP status), the server still answers, and the control index is unchanged.

The control index is created first with known documents. Only requests that cannot change an index
may name it (searches, counts, gets, PITs, refreshes, listings); every request that can write
(document, bulk and by-query writes, index creation and deletion, mappings, settings) names only the fuzz
indices (`fuzz-*`) or invalid names, never a wildcard or `_all` that could reach the control
index. So an unchanged control index shows that reads change nothing and that a write refused or
aimed elsewhere does not leak into another index.

`LEAFSEARCH_FUZZ_REQUESTS` (default 3000) sets the number of requests and `LEAFSEARCH_FUZZ_SEED`
the seed (printed with every failure, with a reproducer of each distinct 5xx).
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import random
import re
import resource
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import httpx
import pytest
import yaml
from conftest import running_server

from leafsearch.rest.routes import ROUTES

SEED = int(os.environ.get("LEAFSEARCH_FUZZ_SEED", "20240807"))
REQUESTS = int(os.environ.get("LEAFSEARCH_FUZZ_REQUESTS", "3000"))
#: The server's address space: a request that would allocate without bound fails (and is reported)
#: instead of taking the machine down.
SERVER_MEMORY_LIMIT = 3 * 1024**3
#: A single request answering later than this is a stalled server.
REQUEST_TIMEOUT = 30.0

CONTROL = "control"
FUZZ_INDICES = ("fuzz-a", "fuzz-b", "fuzz-c")
MAPPING = {
    "properties": {
        "title": {"type": "text"},
        "tag": {"type": "keyword"},
        "n": {"type": "long"},
        "f": {"type": "double"},
        "ts": {"type": "date"},
        "ok": {"type": "boolean"},
        "obj": {"properties": {"k": {"type": "keyword"}}},
    }
}
WORDS = ("quick", "brown", "fox", "jumps", "over", "lazy", "dog", "red", "blue", "green")
TAGS = ("red", "blue", "green")


def control_docs() -> dict[str, dict[str, Any]]:
    return {
        str(i): {
            "title": " ".join(WORDS[(i + j) % len(WORDS)] for j in range(3)),
            "tag": TAGS[i % 3],
            "n": i,
            "f": i / 4,
            "ts": f"2024-01-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
            "ok": i % 2 == 0,
            "obj": {"k": f"k{i % 5}"},
        }
        for i in range(40)
    }


# ---- hostile values ------------------------------------------------------------------------------

NUMBERS: tuple[Any, ...] = (
    0,
    -1,
    1,
    2,
    -(2**31),
    2**31,
    2**63,
    -(2**63) - 1,
    10**30,
    1.5,
    -0.0,
    5e-10,
    1e308,
    -1e308,
    math.nan,
    math.inf,
    -math.inf,
)
TIME_VALUES = (
    "1s",
    "0s",
    "-1",
    "-1s",
    "1x",
    "1.5m",
    "",
    "s",
    "9999999999999d",
    "1nanos",
    "1micros",
    "NaNs",
    "1e3ms",
    " 1s",
    "1 s",
    "1S",
    "1h1m",
)
SHORT_STRINGS = (
    "",
    " ",
    "*",
    "?",
    "a*",
    "*a*a*a*b",
    "(a+)+b",
    "[",
    "\\",
    '"',
    "\u0000",
    "é",
    "\ud7ff",
    "now",
    "now-1d/d",
    "2024-13-45",
    "AUTO",
    "NaN",
    "true",
    "-1",
    "_all",
    "_id",
    "_source",
    "a.b",
    "..",
    "fuzz-a",
    "null",
    "{}",
)
BAD_WRITE_INDEX_NAMES = (
    "",
    "UPPER",
    "_under",
    "-dash",
    "+plus",
    ".",
    "..",
    "a,b",
    "a b",
    'a"b',
    "a#b",
    "a:b",
    "a|b",
    "a<b",
    "a\\b",
    "fuzz-" + "x" * 300,
    "fuzz-é" * 50,
    "fuzz-%00",
    "fuzz-?",
    "fuzz-*",
    "fuzz-a,fuzz-b",
    "-fuzz-a",
)
READ_INDEX_NAMES = (CONTROL, "*", "_all", "c*", "-control", "control,fuzz-a", "missing", "fuzz-*")


def long_string(rng: random.Random) -> str:
    """A string long enough to hurt a careless parser, bounded so the test stays small."""
    size = rng.choice((1_000, 33_000, 100_000))
    return rng.choice(("a", "ab*", "é", "(a|b)", "x ")) * (size // 3)


DEEP = re.compile(rb'"@@deep-(object|array)-(\d+)@@"')


def deep(rng: random.Random) -> str:
    """A stand-in for a value nested objects or arrays deep, expanded by `encode` (Python's own
    JSON encoder would hit its recursion limit first)."""
    return f"@@deep-{rng.choice(('object', 'array'))}-{rng.choice((50, 300, 1_500))}@@"


def expand_deep(text: bytes) -> bytes:
    def nested(match: re.Match[bytes]) -> bytes:
        depth = int(match.group(2))
        if match.group(1) == b"object":
            return b'{"a":' * depth + b"1" + b"}" * depth
        return b"[" * depth + b"1" + b"]" * depth

    return DEEP.sub(nested, text)


def hostile(rng: random.Random) -> Any:
    roll = rng.random()
    if roll < 0.3:
        return rng.choice(NUMBERS)
    if roll < 0.5:
        return rng.choice(SHORT_STRINGS)
    if roll < 0.6:
        return rng.choice(TIME_VALUES)
    if roll < 0.65:
        return long_string(rng)
    if roll < 0.72:
        return deep(rng)
    return rng.choice((None, True, False, [], {}, [1, "a", None], {"unknown": 1}, [[[]]], {"": ""}))


# ---- valid bodies, to be mutated ------------------------------------------------------------------


def queries(rng: random.Random) -> dict[str, Any]:
    word, tag = rng.choice(WORDS), rng.choice(TAGS)
    return rng.choice(
        [
            {"match_all": {}},
            {"match": {"title": f"{word} {rng.choice(WORDS)}"}},
            {"match": {"title": {"query": word, "operator": "and", "fuzziness": "AUTO"}}},
            {"term": {"tag": tag}},
            {"terms": {"tag": [tag, "blue"]}},
            {"range": {"n": {"gte": 1, "lt": 10}}},
            {"range": {"ts": {"gte": "2024-01-03", "lte": "now", "format": "strict_date_optional_time"}}},
            {
                "bool": {
                    "must": [{"match": {"title": word}}],
                    "filter": [{"term": {"tag": tag}}],
                    "should": [{"range": {"f": {"gt": 2.5}}}],
                    "must_not": [{"term": {"ok": True}}],
                    "minimum_should_match": 1,
                }
            },
            {"prefix": {"tag": tag[:2]}},
            {"wildcard": {"tag": {"value": tag[0] + "*"}}},
            {"regexp": {"tag": tag[0] + ".*"}},
            {"fuzzy": {"tag": {"value": tag + "x", "fuzziness": 1}}},
            {"query_string": {"query": f"title:{word} AND n:[1 TO 5]"}},
            {"simple_query_string": {"query": f"{word} +{rng.choice(WORDS)}"}},
            {"exists": {"field": "obj.k"}},
            {"ids": {"values": ["1", "2"]}},
            {"match_phrase": {"title": f"{word} {rng.choice(WORDS)}"}},
            {"multi_match": {"query": word, "fields": ["title", "tag"]}},
            {"constant_score": {"filter": {"term": {"tag": tag}}, "boost": 2}},
        ]
    )


def aggregation(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    agg = rng.choice(
        [
            {"terms": {"field": "tag", "size": 5}},
            {"terms": {"field": "obj.k", "order": {"_key": "asc"}}},
            {"histogram": {"field": "n", "interval": 5}},
            {"histogram": {"field": "f", "interval": 0.5, "min_doc_count": 0}},
            {"date_histogram": {"field": "ts", "calendar_interval": "day"}},
            {"date_histogram": {"field": "ts", "fixed_interval": "12h", "time_zone": "+01:00"}},
            {"range": {"field": "n", "ranges": [{"to": 5}, {"from": 5, "to": 20}]}},
            {"date_range": {"field": "ts", "ranges": [{"to": "now"}, {"from": "2024-01-10"}]}},
            {"avg": {"field": "n"}},
            {"min": {"field": "f"}},
            {"max": {"field": "ts"}},
            {"sum": {"field": "n"}},
            {"value_count": {"field": "tag"}},
            {"cardinality": {"field": "tag"}},
            {"stats": {"field": "f"}},
            {"filter": {"term": {"tag": "red"}}},
            {"missing": {"field": "obj.k"}},
        ]
    )
    if (
        depth < 2
        and rng.random() < 0.3
        and next(iter(agg)) in ("terms", "histogram", "date_histogram", "filter")
    ):
        agg["aggs"] = {"sub": aggregation(rng, depth + 1)}
    return agg


def heavy_search_body(rng: random.Random) -> dict[str, Any]:
    """Bodies that are valid JSON but large or deep: nested aggregations and queries, many terms."""
    depth = rng.choice((20, 120, 300))
    roll = rng.random()
    if roll < 0.3:
        aggs: dict[str, Any] = {"avg": {"field": "n"}}
        for _ in range(depth):
            aggs = {"terms": {"field": "tag"}, "aggs": {"a": aggs}}
        return {"size": 0, "aggs": {"a": aggs}}
    if roll < 0.6:
        query: dict[str, Any] = {"term": {"tag": "red"}}
        for _ in range(depth):
            query = {"bool": {rng.choice(("must", "should", "filter", "must_not")): [query]}}
        return {"query": query}
    if roll < 0.8:
        width = rng.choice((10, 300, 2_000))
        return {"query": {"terms": {"tag": ["v" * width + str(i) for i in range(rng.choice((100, 2_000)))]}}}
    field = rng.choice(("tag", "title", "n"))
    return {
        "query": {"bool": {"should": [{"term": {field: str(i)}} for i in range(rng.choice((1_000, 5_000)))]}}
    }


def search_body(rng: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {"query": queries(rng)}
    for key, make in (
        ("size", lambda: rng.choice((0, 1, 5, 20))),
        ("from", lambda: rng.choice((0, 3))),
        ("sort", lambda: [rng.choice(({"n": "desc"}, {"ts": {"order": "asc"}}, "_score", {"tag": "asc"}))]),
        ("aggs", lambda: {"a": aggregation(rng)}),
        ("_source", lambda: rng.choice((["title", "n"], False, {"excludes": ["obj.*"]}))),
        ("track_total_hits", lambda: rng.choice((True, 10, False))),
        ("post_filter", lambda: queries(rng)),
        ("min_score", lambda: 0.1),
        ("terminate_after", lambda: 5),
        ("timeout", lambda: "10s"),
        ("search_after", lambda: [3]),
        ("docvalue_fields", lambda: ["n", {"field": "ts", "format": "epoch_millis"}]),
        ("fields", lambda: ["tag", "obj.*"]),
        ("slice", lambda: {"id": 0, "max": 2}),
        ("highlight", lambda: {"fields": {"title": {}}}),
    ):
        if rng.random() < 0.25:
            body[key] = make()
    return body


def document(rng: random.Random) -> dict[str, Any]:
    return {
        "title": " ".join(rng.choice(WORDS) for _ in range(4)),
        "tag": rng.choice(TAGS),
        "n": rng.randrange(100),
        "f": rng.random() * 10,
        "ts": f"2024-02-0{rng.randrange(1, 9)}T00:00:00Z",
        "ok": rng.random() < 0.5,
        "obj": {"k": rng.choice(TAGS)},
    }


def index_body(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [
            {
                "settings": {"number_of_shards": rng.choice((1, 2)), "refresh_interval": "1s"},
                "mappings": MAPPING,
            },
            {"mappings": {"dynamic": "strict", "properties": {"x": {"type": "keyword", "ignore_above": 10}}}},
            {"settings": {"index": {"max_result_window": 50, "number_of_replicas": 0}}},
            {"aliases": {"fuzz-alias": {}}},
            {},
        ]
    )


def mapping_body(rng: random.Random) -> dict[str, Any]:
    return {
        "properties": {
            rng.choice(("x", "y", "tag")): {"type": rng.choice(("keyword", "long", "text", "date"))}
        }
    }


def settings_body(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [
            {"index": {"refresh_interval": "2s"}},
            {"index": {"max_result_window": 100}},
            {"index.number_of_replicas": 0},
            {"index": {"max_terms_count": 1000}},
        ]
    )


def cluster_settings_body(rng: random.Random) -> dict[str, Any]:
    return {
        rng.choice(("transient", "persistent")): rng.choice(
            [
                {"search.max_buckets": 10_000},
                {"search.max_keep_alive": "1h"},
                {"search.default_keep_alive": "1m"},
                {"search.max_open_scroll_context": 100},
                {"indices.query.bool.max_clause_count": 1024},
                {"action.auto_create_index": True},
            ]
        )
    }


def update_body(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [
            {"doc": {"n": 1}},
            {"doc": {"tag": "red"}, "doc_as_upsert": True},
            {"upsert": document(rng), "doc": {"n": 2}},
            {"script": {"source": "ctx._source.n += 1"}},
        ]
    )


def mget_body(rng: random.Random) -> dict[str, Any]:
    return rng.choice(
        [{"ids": ["1", "2", "missing"]}, {"docs": [{"_id": "1", "_source": ["n"]}, {"_id": "3"}]}]
    )


def pit_close_body(fuzzer: Fuzzer) -> dict[str, Any]:
    return {"id": fuzzer.context_id("pit")}


def scroll_body(fuzzer: Fuzzer) -> dict[str, Any]:
    return {"scroll_id": fuzzer.context_id("scroll"), "scroll": fuzzer.rng.choice(("1m", "10s"))}


# ---- mutation -------------------------------------------------------------------------------------


def mutate(rng: random.Random, value: Any) -> Any:
    """`value` (a JSON tree) with one node replaced, removed, renamed or wrapped."""
    slots: list[tuple[Any, Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            for key, child in node.items():
                slots.append((node, key))
                visit(child)
        elif isinstance(node, list):
            for i, child in enumerate(node):
                slots.append((node, i))
                visit(child)

    value = json.loads(json.dumps(value))
    visit(value)
    if not slots:
        return hostile(rng)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        container, key = rng.choice(slots)
        roll = rng.random()
        try:
            if roll < 0.6:
                container[key] = hostile(rng)
            elif roll < 0.7 and isinstance(container, dict):
                container.pop(key)
            elif roll < 0.8 and isinstance(container, dict):
                container[rng.choice(("unknown_field", key + "x", key.upper(), ""))] = container.pop(key)
            elif roll < 0.9:
                container[key] = [container[key]]
            else:
                container[key] = {"x": container[key]}
        except (KeyError, IndexError):
            continue  # an earlier mutation removed this slot
    return value


def encode(rng: random.Random, value: Any) -> bytes:
    """JSON text of `value`, sometimes broken: truncated, with garbage, or not JSON at all."""
    text = json.dumps(value, allow_nan=True, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    text = expand_deep(text)
    roll = rng.random()
    if roll < 0.75:
        return text
    if roll < 0.85:
        return text[: rng.randrange(len(text) + 1)]
    if roll < 0.9:
        return text + rng.choice((b"}", b",", b" x", b"\x00", b"\xff"))
    return rng.choice(
        (b"", b"null", b"[]", b"1", b'"x"', b"{", b"{{", b"\xff\xfe", b"{'a': 1}", b'{"a":1,"a":2}', b"NaN")
    )


def plain(value: Any) -> bytes:
    """One NDJSON line of `value`, never broken."""
    return expand_deep(json.dumps(value, allow_nan=True).encode("utf-8", "surrogatepass"))


def bulk_lines(fuzzer: Fuzzer, path_index: str | None) -> bytes:
    rng = fuzzer.rng
    lines: list[bytes] = []
    for i in range(rng.randrange(1, 8)):
        op = rng.choice(("index", "create", "update", "delete"))
        meta: dict[str, Any] = {"_id": str(rng.randrange(20))}
        if path_index is None or rng.random() < 0.3:
            meta["_index"] = fuzzer.write_index()
        if rng.random() < 0.1:
            meta["routing"] = rng.choice(("r1", "r2"))
        action: Any = {op: meta}
        source: Any = (
            {"doc": {"n": i}, "doc_as_upsert": True}
            if op == "update"
            else document(rng)
            if op != "delete"
            else None
        )
        if rng.random() < 0.3:
            action = mutate(rng, action)
        if source is not None and rng.random() < 0.3:
            source = mutate(rng, source)
        lines.append(encode(rng, action) if rng.random() < 0.2 else plain(action))
        if source is not None:
            lines.append(encode(rng, source) if rng.random() < 0.2 else plain(source))
        if rng.random() < 0.05:
            lines.append(rng.choice((b"", b"{}", b"[]", b"garbage", b'{"index":{}}')))
    body = b"\n".join(lines)
    return body if rng.random() < 0.1 else body + b"\n"


# ---- the fuzzer -----------------------------------------------------------------------------------

WRITE_HANDLERS = {
    "create_index",
    "delete_index",
    "put_mapping",
    "put_settings",
    "index_doc",
    "create_doc",
    "delete_doc",
    "update_doc",
    "bulk",
    "close_index",
    "open_index",
    "delete_by_query",
    "update_by_query",
    "reindex",
}
BODIES: dict[str, Callable[[random.Random], Any]] = {
    "create_index": index_body,
    "put_mapping": mapping_body,
    "put_settings": settings_body,
    "put_cluster_settings": cluster_settings_body,
    "index_doc": document,
    "create_doc": document,
    "update_doc": update_body,
    "mget": mget_body,
    "search": search_body,
    "count": lambda rng: {"query": queries(rng)},
    "open_pit": lambda rng: {"index_filter": queries(rng)},
}
PARAM_VALUES: dict[str, tuple[str, ...]] = {
    "size": ("0", "10", "-1", "10001", "abc", "1.5", "99999999999999999999"),
    "from": ("0", "-5", "abc", "10000"),
    "scroll": TIME_VALUES,
    "keep_alive": TIME_VALUES,
    "timeout": TIME_VALUES,
    "master_timeout": TIME_VALUES,
    "refresh": ("true", "false", "wait_for", "", "maybe"),
    "routing": ("r1", "", "r1,r2", "%00"),
    "wait_for_active_shards": ("1", "all", "0", "-1", "x"),
    "if_seq_no": ("0", "-1", "x", "99999999999999999999"),
    "if_primary_term": ("1", "0", "x"),
    "version": ("true", "1", "x"),
    "op_type": ("index", "create", "delete", "x"),
    "q": ("title:fox", "*", "n:[1 TO", "tag:(red OR blue)", "title:fo~2", "a" * 5_000, "/(a+)+b/"),
    "sort": ("n:desc", "n", "tag:up", ":", "_doc"),
    "track_total_hits": ("true", "false", "5", "-1", "x"),
    "expand_wildcards": ("open", "all", "none", "closed,hidden", "x"),
    "ignore_unavailable": ("true", "false", "x"),
    "allow_no_indices": ("true", "false", "x"),
    "_source": ("false", "true", "n,title", ""),
    "terminate_after": ("1", "-1", "x"),
    "search_type": ("query_then_fetch", "dfs_query_then_fetch", "x"),
    "format": ("json", "yaml", "txt", "x"),
    "filter_path": ("hits.hits._id", "**", "-hits", ""),
    "level": ("cluster", "indices", "shards", "x"),
    "wait_for_status": ("green", "yellow", "red", "x"),
    "wait_for_nodes": ("1", ">=1", "x"),
    "h": ("index,docs.count", "x", ""),
    "s": ("index:desc", "x"),
    "bytes": ("b", "kb", "x"),
    "time": ("ms", "x"),
    "preference": ("_local", "_shards:0", "x"),
    "retry_on_conflict": ("1", "-1", "x"),
    "min_score": ("0.5", "NaN", "x"),
    "default_operator": ("AND", "OR", "x"),
    "df": ("title", ""),
    "lenient": ("true", "x"),
    "slices": ("1", "x"),
}


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    def reproducer(self) -> str:
        data = self.body[:2_000]
        shown = data.decode("utf-8", "backslashreplace") + (
            "...(truncated)" if len(self.body) > 2_000 else ""
        )
        headers = " ".join(f"-H '{k}: {v}'" for k, v in self.headers.items())
        return f"curl -X {self.method} '$URL{self.url}' {headers} --data-binary {json.dumps(shown)}"


@dataclass
class Fuzzer:
    rng: random.Random
    contexts: dict[str, list[str]] = field(default_factory=lambda: {"scroll": [], "pit": []})

    def write_index(self) -> str:
        return (
            self.rng.choice(FUZZ_INDICES)
            if self.rng.random() < 0.8
            else self.rng.choice(BAD_WRITE_INDEX_NAMES)
        )

    def read_index(self) -> str:
        roll = self.rng.random()
        if roll < 0.5:
            return CONTROL
        if roll < 0.75:
            return self.rng.choice(READ_INDEX_NAMES)
        return self.write_index()

    def context_id(self, kind: str) -> Any:
        """A real id of this run (open, closed or of the other kind), or a forged one."""
        rng = self.rng
        known = self.contexts[kind] + self.contexts["pit" if kind == "scroll" else "scroll"]
        roll = rng.random()
        if roll < 0.4 and known:
            real = rng.choice(known)
            return rng.choice((real, real[:-3], real + "AA", real.lower(), real[::-1]))
        forged = [
            base64.urlsafe_b64encode(
                f"leafsearch:{kind}:node:session:{rng.randrange(10**6)}".encode()
            ).decode(),
            base64.urlsafe_b64encode(b"leafsearch:" + os.urandom(rng.randrange(1, 40))).decode(),
            base64.b64encode(os.urandom(24)).decode(),
            "",
            "_all",
            "%%%",
            "a" * 5_000,
        ]
        return rng.choice(forged + [hostile(rng)])

    def remember(self, response: httpx.Response) -> None:
        try:
            body = response.json()
        except ValueError:
            return
        if isinstance(body, dict):
            if isinstance(body.get("_scroll_id"), str):
                self.contexts["scroll"].append(body["_scroll_id"])
            if isinstance(body.get("id"), str) and "pit" in str(response.request.url):
                self.contexts["pit"].append(body["id"])

    def placeholder(self, name: str, writes: bool) -> str:
        rng = self.rng
        if name == "index":
            return self.write_index() if writes else self.read_index()
        if name == "id":
            return rng.choice(("1", "2", "new", "", "a/b", "x" * 600, "é", "%00", "_all", "-1"))
        if name == "scroll_id":
            value = self.context_id("scroll")
            return (value if isinstance(value, str) else json.dumps(value))[:2_000]  # within URL limits
        if name == "name":
            return rng.choice(("index.number_of_shards", "*", "fuzz-alias", "x", "index.*"))
        if name == "node_id":
            return rng.choice(("_local", "_all", "x", "*", "_master"))
        if name in ("metric", "index_metric"):
            return rng.choice(("indices", "search", "docs", "_all", "x", "indices,jvm"))
        return "x"

    def params(self, route: Any) -> dict[str, str]:
        rng = self.rng
        params: dict[str, str] = {}
        known = sorted(route.params)
        for _ in range(rng.choice((0, 0, 1, 2, 3))):
            if known:
                name = rng.choice(known)
                params[name] = rng.choice(PARAM_VALUES.get(name, ("true", "x", "-1", "")))
        if rng.random() < 0.05:
            params[rng.choice(("unknown", "sizee", "Size", "pretty", "human", "error_trace"))] = "true"
        if route.handler.__name__ == "cluster_health" or any(p.startswith("wait_for") for p in params):
            # A wait that cannot be satisfied (the health of a missing index, too many active shards)
            # lasts its timeout, as in Elasticsearch: keep it short.
            params["timeout"] = "100ms"
        return params

    def body(self, route: Any, path_index: str | None) -> bytes:
        rng = self.rng
        handler = route.handler.__name__
        if handler == "bulk":
            return bulk_lines(self, path_index)
        if handler in ("scroll",):
            return encode(rng, mutate(rng, scroll_body(self)) if rng.random() < 0.3 else scroll_body(self))
        if handler == "clear_scroll":
            return encode(rng, {"scroll_id": self.context_id("scroll")})
        if handler == "close_pit":
            return encode(rng, pit_close_body(self))
        if handler in ("search", "count") and rng.random() < 0.05:
            return encode(rng, heavy_search_body(rng))  # never mutated: too deep to copy
        if handler == "search" and rng.random() < 0.15:
            pit = {"id": self.context_id("pit"), "keep_alive": rng.choice(TIME_VALUES)}
            return encode(rng, {**search_body(rng), "pit": pit})
        if handler == "put_settings" and path_index is None:
            # `PUT /_settings` updates every index, the control index too: only settings that do not
            # exist, so that the request is refused whatever else is wrong with it.
            return encode(rng, {"index": {"fuzz_unknown_setting": hostile(rng)}})
        make = BODIES.get(handler)
        if make is None:
            return b"" if rng.random() < 0.7 else encode(rng, hostile(rng))
        valid = make(rng)
        roll = rng.random()
        if roll < 0.25:
            return encode(rng, valid)
        if roll < 0.85:
            return encode(rng, mutate(rng, valid))
        return encode(rng, hostile(rng))

    def request(self) -> Sent:
        rng = self.rng
        route = rng.choice(ROUTES)
        writes = route.handler.__name__ in WRITE_HANDLERS
        method = rng.choice(sorted(route.methods))
        values = {name: self.placeholder(name, writes) for name in (p for _, p in route.placeholders)}
        path = route.path
        for name, value in values.items():
            # `.` and `..` encoded: a client would otherwise remove them as dot segments.
            segment = quote(value, safe=",*") if value not in (".", "..") else value.replace(".", "%2E")
            path = path.replace("{" + name + "}", segment)
        params = self.params(route)
        body = b"" if method in ("HEAD",) else self.body(route, values.get("index"))
        headers = {
            "content-type": "application/x-ndjson" if route.handler.__name__ == "bulk" else "application/json"
        }
        roll = rng.random()
        if roll < 0.05:
            headers["content-type"] = rng.choice(
                ("text/plain", "application/smile", "application/cbor", "x/y", "")
            )
        elif roll < 0.08 and body:
            headers["content-encoding"] = "gzip"
            body = gzip.compress(body) if rng.random() < 0.8 else body
        url = path + ("?" + urlencode(params) if params else "")
        return Sent(method, url, headers, body)


# ---- the checks -----------------------------------------------------------------------------------

#: Answers that Elasticsearch itself gives without its error envelope.
PLAIN_ERRORS = ("Incorrect HTTP method for uri", "no handler found for uri")


def shape_problem(response: httpx.Response, method: str) -> str | None:
    """Why a 4xx answer is not Elasticsearch's, or None."""
    status = response.status_code
    if method == "HEAD":
        return None if not response.content else "a HEAD answer with a body"
    if response.headers.get("content-type") == "application/yaml":  # `format=yaml` was asked
        body = yaml.safe_load(response.text)
    else:
        try:
            body = response.json()
        except ValueError:
            return f"not JSON: {response.text[:200]!r}"
    if not isinstance(body, dict):
        return f"not an object: {response.text[:200]!r}"
    error = body.get("error")
    if error is None:
        # Not-found answers that are results, not errors, as in Elasticsearch.
        if status == 404 and (
            body.get("found") is False or body.get("result") == "not_found" or "num_freed" in body
        ):
            return None
        if status == 408 and body.get("timed_out") is True:  # cluster health waited in vain
            return None
        if "failures" in body and "batches" in body:  # a by-query answer: its failures' status
            return None
        return f"no error object: {response.text[:300]!r}"
    if isinstance(error, str):
        if error.startswith(PLAIN_ERRORS) or status == 406:
            return None
        if status == 404 and re.fullmatch(r"alias(es)? \[.*\] missing", error) and body.get("status") == 404:
            return None  # GET _alias of a missing alias, in Elasticsearch's own words and shape
        return f"a plain error string: {error[:200]!r}"
    if body.get("status") != status:
        return f"status {body.get('status')!r} in the body, {status} on the wire"
    if not (isinstance(error.get("type"), str) and isinstance(error.get("reason"), str | None)):
        return f"error without type or reason: {str(error)[:300]}"
    roots = error.get("root_cause")
    if not (isinstance(roots, list) and roots and all(isinstance(r, dict) and "type" in r for r in roots)):
        return f"error without root_cause: {str(error)[:300]}"
    return None


def snapshot(http: httpx.Client) -> dict[str, Any]:
    """What must not change in the control index: its documents, mapping and settings."""
    found = http.post(f"/{CONTROL}/_search", json={"size": 1000, "sort": ["n"], "seq_no_primary_term": True})
    hits = found.json()["hits"]["hits"] if found.status_code == 200 else found.text
    return {
        "docs": [(h["_id"], h["_source"], h["_seq_no"]) for h in hits] if isinstance(hits, list) else hits,
        "count": http.get(f"/{CONTROL}/_count").json()["count"],
        "mapping": http.get(f"/{CONTROL}/_mapping").json(),
        "settings": http.get(f"/{CONTROL}/_settings").json(),
    }


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SERVER_MEMORY_LIMIT, SERVER_MEMORY_LIMIT))


@pytest.mark.timeout(900)
def test_fuzzed_requests_get_elasticsearch_answers_and_change_nothing_else(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", preexec_fn=limit_memory) as (url, process),
        httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT) as http,
    ):
        assert (
            http.put(
                f"/{CONTROL}", json={"settings": {"number_of_shards": 2}, "mappings": MAPPING}
            ).status_code
            == 200
        )
        lines = b"".join(
            b'{"index":{"_id":"%s"}}\n%s\n' % (i.encode(), json.dumps(doc).encode())
            for i, doc in control_docs().items()
        )
        loaded = http.post(
            f"/{CONTROL}/_bulk",
            params={"refresh": "true"},
            content=lines,
            headers={"content-type": "application/x-ndjson"},
        ).json()
        assert not loaded["errors"]
        before = snapshot(http)
        assert before["count"] == len(control_docs())

        fuzzer = Fuzzer(random.Random(SEED))
        server_errors: dict[str, tuple[Sent, str]] = {}  # a 5xx's signature -> first request, answer
        bad_shapes: list[tuple[Sent, str]] = []
        stalled: list[Sent] = []
        for _ in range(REQUESTS):
            sent = fuzzer.request()
            try:
                response = http.request(sent.method, sent.url, headers=sent.headers, content=sent.body)
            except httpx.TimeoutException:
                stalled.append(sent)
                if len(stalled) >= 3:
                    break
                continue
            if response.status_code >= 500:
                try:
                    error = response.json()["error"]
                    signature = f"{response.status_code} {error['type']}: {str(error['reason'])[:120]}"
                except (ValueError, KeyError, TypeError):
                    signature = f"{response.status_code} {response.text[:120]}"
                server_errors.setdefault(signature, (sent, response.text[:500]))
            elif response.status_code >= 400:
                problem = shape_problem(response, sent.method)
                if problem is not None:
                    bad_shapes.append((sent, f"{response.status_code}: {problem}"))
            else:
                fuzzer.remember(response)
        alive = process.poll() is None and http.get("/").status_code == 200
        after = snapshot(http) if alive else None

    report = [f"seed {SEED}, {REQUESTS} requests (LEAFSEARCH_FUZZ_SEED, LEAFSEARCH_FUZZ_REQUESTS)"]
    for signature, (sent, text) in server_errors.items():
        report.append(f"5xx {signature}\n    {sent.reproducer()}\n    -> {text}")
    for sent, problem in bad_shapes[:20]:
        report.append(f"shape {problem}\n    {sent.reproducer()}")
    for sent in stalled:
        report.append(f"no answer within {REQUEST_TIMEOUT}s\n    {sent.reproducer()}")
    if not alive:
        report.append("the server is down after the run")
    elif after != before:
        changed = [key for key in before if before[key] != after[key]]
        report.append(f"the control index changed: {changed}: {str({k: after[k] for k in changed})[:2000]}")
    assert len(report) == 1, "\n".join(report)
