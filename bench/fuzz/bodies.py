"""What the fuzzer sends: hostile values, valid bodies to mutate, mutation and broken encodings,
and the heavy inputs that once cost the server memory or time (huge `terms` lists, long `match`
texts, many sort keys, many aggregations, documents with many fields, mapping parameters of the
wrong type)."""

from __future__ import annotations

import json
import math
import random
import re
from typing import Any

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
    "fuzz-\0",
    "\0",
    "fuzz-a\0b",
    "fuzz-" + "x" * 251,  # 256 bytes
    "fuzz-#x",
    "fuzz-:x",
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


# ---- heavy inputs -------------------------------------------------------------------------------


def giant_search_body(rng: random.Random) -> dict[str, Any]:
    """A body that is valid JSON but far past a limit (or near it): what a refusal must answer
    without keeping anything of it."""
    roll = rng.random()
    if roll < 0.2:
        count = rng.choice((60_000, 100_000))
        return {"query": {"terms": {"tag": [f"t{i}" for i in range(count)]}}}
    if roll < 0.4:
        words = rng.choice((4_000, 250_000))  # 2 MB of text at the most
        return {"query": {"match": {"title": " ".join(f"w{i}" for i in range(words))}}}
    if roll < 0.6:
        keys = rng.choice((100, 101, 1_000, 100_000))
        return {"sort": [rng.choice(({"n": "asc"}, {"tag": "desc"}, "_doc")) for _ in range(keys)]}
    if roll < 0.8:
        count = rng.choice((1_000, 1_001, 10_000, 100_000))
        return {"size": 0, "aggs": {f"m{i}": {"max": {"field": "n"}} for i in range(count)}}
    text = " OR ".join(f"title:w{i}" for i in range(rng.choice((1_000, 5_000))))
    return {"query": {"query_string": {"query": text}}}


def many_fields(rng: random.Random) -> dict[str, Any]:
    """A document adding many new fields (past `index.mapping.total_fields.limit` or not)."""
    count = rng.choice((500, 2_000, 20_000, 100_000))
    return {f"f{rng.randrange(10**6)}_{i}": i for i in range(count)}


#: Every field parameter leafsearch reads, for mappings with wrong-typed values.
FIELD_PARAMS = (
    "index", "doc_values", "store", "coerce", "ignore_malformed", "norms", "eager_global_ordinals",
    "index_phrases", "fielddata", "analyzer", "search_analyzer", "index_options", "similarity",
    "normalizer", "ignore_above", "position_increment_gap", "boost", "scaling_factor", "meta",
    "index_prefixes", "copy_to", "format", "null_value", "locale", "fields", "properties", "dynamic",
    "enabled", "type",
)  # fmt: skip
FIELD_TYPES = (
    "keyword", "text", "long", "integer", "double", "scaled_float", "date", "date_nanos", "boolean",
    "ip", "unsigned_long", "object",
)  # fmt: skip
RUNTIME_PARAMS = ("type", "script", "on_script_error", "meta", "format", "locale", "fields", "fetch_fields")
TEMPLATE_PARAMS = (
    "match", "unmatch", "path_match", "path_unmatch", "match_mapping_type", "unmatch_mapping_type",
    "match_pattern", "mapping", "runtime",
)  # fmt: skip


def wrong_mapping(rng: random.Random) -> dict[str, Any]:
    """A mapping whose parameters hold values of any type: a field, a runtime field or a dynamic
    template."""
    roll = rng.random()
    if roll < 0.6:
        node: dict[str, Any] = {"type": rng.choice(FIELD_TYPES)}
        for _ in range(rng.choice((1, 1, 2, 3))):
            node[rng.choice(FIELD_PARAMS)] = hostile(rng)
        return {"properties": {rng.choice(("x", "y", "z.w")): node}}
    if roll < 0.8:
        runtime: dict[str, Any] = {"type": rng.choice(("keyword", "long", "date", "composite", "lookup"))}
        runtime[rng.choice(RUNTIME_PARAMS)] = hostile(rng)
        return {"runtime": {"r": runtime}}
    template: dict[str, Any] = {"match": "*", "mapping": {"type": "keyword"}}
    template[rng.choice(TEMPLATE_PARAMS)] = hostile(rng)
    return {"dynamic_templates": [{"t": template}]}


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
