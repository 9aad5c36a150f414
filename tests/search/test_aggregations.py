"""Aggregations over several segments (with deleted documents) of several shards.

Every expected value is computed here with plain Python over the live documents, independently of
the numpy engine, so the reduce over segments and shards is checked against the definition.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from zoneinfo import ZoneInfo

import numpy as np
import orjson
import pytest

from leafsearch.errors import ElasticError
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.dates import DateFormatter
from leafsearch.index.parsed import ParsedDoc
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment import Segment, SegmentWriter, build_doc_values, to_term_array
from leafsearch.index.segment_build import segment_from_buffer
from leafsearch.search.aggregations import collect, parse_aggs, reduce, typed_keys

DEFAULT_DATE = DateFormatter("strict_date_optional_time||epoch_millis")
_KINDS = {
    "keyword": "keyword",
    "long": "long",
    "double": "double",
    "scaled_float": "long",
    "boolean": "long",
    "date": "long",
    "date_nanos": "long",
    "text": "text",
}
BASE = 1577836800000  # 2020-01-01T00:00:00Z
NOW = 1_600_000_000_000
TAGS = ["a", "b", "c", "d", "é", "zz"]


def field_type(type_name: str, **kw):
    return SimpleNamespace(
        type=type_name,
        kind=_KINDS[type_name],
        doc_values=kw.get("doc_values", True),
        formatter=DEFAULT_DATE if type_name.startswith("date") else None,
        scaling_factor=kw.get("scaling_factor"),
        nanos=type_name == "date_nanos",
    )


class StubMapping:
    """The two things aggregations ask a mapping: `field(path)` with type, kind, formatter..."""

    def __init__(self, fields: dict) -> None:
        self.fields = fields

    def field(self, path: str):
        return self.fields.get(path)


MAPPING = StubMapping(
    {
        "tag": field_type("keyword"),
        "n": field_type("long"),
        "price": field_type("double"),
        "score": field_type("scaled_float", scaling_factor=100),
        "flag": field_type("boolean"),
        "ts": field_type("date"),
        "tsn": field_type("date_nanos"),
        "msg": field_type("text"),
        "nodv": field_type("keyword", doc_values=False),
    }
)


def as_list(value) -> list:
    return value if isinstance(value, list) else [value]


def make_docs(count: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    docs = []
    for i in range(count):
        doc: dict = {"id": i}
        if rng.random() < 0.85:
            doc["tag"] = (
                rng.choice(TAGS) if rng.random() < 0.8 else sorted({rng.choice("abc"), rng.choice("dxy")})
            )
        if rng.random() < 0.9:
            doc["n"] = (
                rng.randint(-20, 100) if rng.random() < 0.85 else [rng.randint(0, 9), rng.randint(0, 9)]
            )
        if rng.random() < 0.9:
            doc["price"] = round(rng.uniform(0, 50), 2)
        if rng.random() < 0.8:
            doc["score"] = rng.randint(0, 1000) / 100
        if rng.random() < 0.9:
            doc["flag"] = rng.random() < 0.3
        if rng.random() < 0.9:
            doc["ts"] = BASE + rng.randint(0, 90 * 86400) * 1000 + rng.randint(0, 999)
        docs.append(doc)
    return docs


def parsed(doc: dict) -> ParsedDoc:
    p = ParsedDoc(orjson.dumps(doc))
    if "tag" in doc:
        p.keyword["tag"] = sorted(set(as_list(doc["tag"])))
    if "n" in doc:
        p.long["n"] = sorted(as_list(doc["n"]))
    if "price" in doc:
        p.double["price"] = [doc["price"]]
    if "score" in doc:
        p.long["score"] = [round(doc["score"] * 100)]
    if "flag" in doc:
        p.long["flag"] = [int(doc["flag"])]
    if "ts" in doc:
        p.long["ts"] = [doc["ts"]]
        p.long["tsn"] = [doc["ts"] * 1_000_000 + 123_456]
    p.text["msg"] = (["hello"], [0])
    return p


def is_deleted(doc: dict) -> bool:
    return doc["id"] % 7 == 3


def build_searchers(
    docs: list[dict], folder: Path, shards: int = 3, segments: int = 2, parse=parsed
) -> list[Searcher]:
    searchers = []
    for s in range(shards):
        shard_docs = docs[s::shards]
        views, base = [], 0
        for c, chunk in enumerate(np.array_split(np.arange(len(shard_docs)), segments)):
            buffer = IndexBuffer()
            for j in chunk.tolist():
                buffer.add(str(shard_docs[j]["id"]), parse(shard_docs[j]), j, 1, None)
            segment = segment_from_buffer(buffer, folder / f"shard{s}_seg{c}")
            live = np.array([not is_deleted(shard_docs[j]) for j in chunk.tolist()], dtype=bool)
            views.append(SegmentView(segment, live, base, int(live.sum())))
            base += segment.max_doc
        searchers.append(Searcher(s, views, generation=1))
    return searchers


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    docs = make_docs(400)
    searchers = build_searchers(docs, tmp_path_factory.mktemp("aggs"))
    return searchers, [d for d in docs if not is_deleted(d)]


def query_context(**kwargs):
    """The query engine's context when it is importable (filter aggregations need it)."""
    try:
        from leafsearch.search.matching import QueryContext
    except ImportError:
        return SimpleNamespace(**kwargs)
    return QueryContext(**kwargs)


def run(body: dict, searchers: list[Searcher], mapping=MAPPING, select=None) -> dict:
    """Parse, collect every segment of every shard (matched docs: `select(doc)`), reduce."""
    tree = parse_aggs(body, mapping, index="idx", now_millis=NOW)
    partials = []
    for searcher in searchers:
        ctx = query_context(mapping=mapping, now_millis=NOW, searcher=searcher, needs_scores=False)
        for view in searcher.views:
            docs = view.live_docs
            if select is not None and len(docs):
                sources = [orjson.loads(s) for s in view.segment.sources(docs)]
                docs = docs[np.array([select(d) for d in sources], dtype=bool)]
            partials.append(collect(tree, view, docs, ctx))
    return reduce(tree, partials)


def values_of(docs: list[dict], name: str) -> list:
    return [v for d in docs if name in d for v in as_list(d[name])]


def iso(millis: int) -> str:
    return (
        datetime.fromtimestamp(millis / 1000, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"
    )


# ---- terms ----------------------------------------------------------------------------------------


def expected_terms(docs, field, size=10, min_doc_count=1, key=lambda kv: (-kv[1], kv[0])):
    counts = Counter(v for d in docs if field in d for v in set(as_list(d[field])))
    ranked = sorted(((k, c) for k, c in counts.items() if c >= min_doc_count), key=key)
    return ranked[:size], sum(c for _, c in ranked[size:])


def test_terms_keyword_counts_order_and_other(corpus):
    searchers, live = corpus
    result = run({"t": {"terms": {"field": "tag", "size": 4}}}, searchers)["t"]
    top, other = expected_terms(live, "tag", size=4)
    assert [(b["key"], b["doc_count"]) for b in result["buckets"]] == top
    assert result["sum_other_doc_count"] == other and result["doc_count_error_upper_bound"] == 0
    assert list(result["buckets"][0]) == ["key", "doc_count"]


def test_terms_key_order_is_utf8_byte_order(corpus):
    searchers, live = corpus
    asc = run({"t": {"terms": {"field": "tag", "order": {"_key": "asc"}, "size": 20}}}, searchers)["t"]
    desc = run({"t": {"terms": {"field": "tag", "order": {"_key": "desc"}, "size": 20}}}, searchers)["t"]
    keys = sorted({v for v in values_of(live, "tag")}, key=lambda s: s.encode())
    assert [b["key"] for b in asc["buckets"]] == keys
    assert [b["key"] for b in desc["buckets"]] == keys[::-1]


def test_terms_order_by_sub_metric_and_count_asc(corpus):
    searchers, live = corpus
    body = {
        "t": {
            "terms": {"field": "tag", "order": {"mx.max": "desc"}},
            "aggs": {"mx": {"stats": {"field": "price"}}},
        }
    }
    buckets = run(body, searchers)["t"]["buckets"]
    maxima = {}
    for d in live:
        for t in set(as_list(d.get("tag", []))):
            if "price" in d:
                maxima[t] = max(maxima.get(t, -math.inf), d["price"])
    assert [b["key"] for b in buckets] == sorted(maxima, key=lambda t: (-maxima[t], t.encode()))
    asc = run({"t": {"terms": {"field": "tag", "order": {"_count": "asc"}, "size": 3}}}, searchers)["t"]
    top, _ = expected_terms(live, "tag", size=3, key=lambda kv: (kv[1], kv[0].encode()))
    assert [(b["key"], b["doc_count"]) for b in asc["buckets"]] == top


def test_terms_min_doc_count_include_exclude_missing(corpus):
    searchers, live = corpus
    counts = Counter(v for d in live for v in set(as_list(d.get("tag", []))))
    high = run({"t": {"terms": {"field": "tag", "min_doc_count": 40}}}, searchers)["t"]["buckets"]
    assert {b["key"] for b in high} == {k for k, c in counts.items() if c >= 40}
    regex = run({"t": {"terms": {"field": "tag", "include": "[a-c]|z.*", "exclude": ["b"]}}}, searchers)["t"]
    assert {b["key"] for b in regex["buckets"]} == {"a", "c", "zz"}
    listed = run({"t": {"terms": {"field": "tag", "include": ["x", "y", "nope"]}}}, searchers)["t"]
    assert {b["key"]: b["doc_count"] for b in listed["buckets"]} == {"x": counts["x"], "y": counts["y"]}
    missing = run({"t": {"terms": {"field": "tag", "missing": "N/A", "size": 20}}}, searchers)["t"]["buckets"]
    assert {b["key"]: b["doc_count"] for b in missing}["N/A"] == sum(1 for d in live if "tag" not in d)


def test_terms_min_doc_count_zero_lists_terms_without_matches(corpus):
    searchers, live = corpus
    result = run(
        {"t": {"terms": {"field": "tag", "min_doc_count": 0, "size": 20}}},
        searchers,
        select=lambda d: d.get("tag") == "a",
    )["t"]["buckets"]
    counts = {b["key"]: b["doc_count"] for b in result}
    assert counts["a"] == sum(1 for d in live if d.get("tag") == "a")
    assert set(counts) >= {"b", "c", "zz"} and counts["zz"] == 0


def test_terms_numeric_boolean_and_date_keys(corpus):
    searchers, live = corpus
    numbers = run({"t": {"terms": {"field": "n", "size": 5}}}, searchers)["t"]
    top, other = expected_terms(live, "n", size=5)
    assert [(b["key"], b["doc_count"]) for b in numbers["buckets"]] == top
    assert numbers["sum_other_doc_count"] == other and isinstance(numbers["buckets"][0]["key"], int)
    flags = run({"t": {"terms": {"field": "flag"}}}, searchers)["t"]["buckets"]
    expected = Counter(d["flag"] for d in live if "flag" in d)
    assert {(b["key"], b["key_as_string"], b["doc_count"]) for b in flags} == {
        (int(k), str(k).lower(), c) for k, c in expected.items()
    }
    dates = run({"t": {"terms": {"field": "ts", "size": 1, "order": {"_key": "asc"}}}}, searchers)["t"][
        "buckets"
    ]
    first = min(values_of(live, "ts"))
    assert dates == [{"key": first, "key_as_string": iso(first), "doc_count": 1}]


def test_terms_on_unmapped_field_is_empty(corpus):
    searchers, _ = corpus
    assert run({"t": {"terms": {"field": "nope"}}}, searchers)["t"] == {
        "doc_count_error_upper_bound": 0,
        "sum_other_doc_count": 0,
        "buckets": [],
    }


# ---- metrics --------------------------------------------------------------------------------------


def test_single_value_metrics(corpus):
    searchers, live = corpus
    body = {k: {k: {"field": "n"}} for k in ("min", "max", "sum", "avg", "value_count")}
    body["card"] = {"cardinality": {"field": "tag"}}
    body["card_n"] = {"cardinality": {"field": "n", "precision_threshold": 100}}
    result = run(body, searchers)
    ns = values_of(live, "n")
    assert result["min"] == {"value": float(min(ns))} and result["max"] == {"value": float(max(ns))}
    assert result["sum"] == {"value": float(sum(ns))}
    assert result["avg"]["value"] == pytest.approx(sum(ns) / len(ns))
    assert result["value_count"] == {"value": len(ns)}
    assert result["card"] == {"value": len(set(values_of(live, "tag")))}
    assert result["card_n"] == {"value": len(set(ns))}


def test_metrics_on_dates_scaled_floats_and_nanos(corpus):
    searchers, live = corpus
    result = run(
        {
            "lo": {"min": {"field": "ts"}},
            "lon": {"min": {"field": "tsn"}},
            "avg": {"avg": {"field": "score"}},
            "fmt": {"max": {"field": "ts", "format": "yyyy-MM-dd"}},
        },
        searchers,
    )
    first = min(values_of(live, "ts"))
    assert result["lo"] == {"value": float(first), "value_as_string": iso(first)}
    assert result["lon"] == result["lo"]  # date_nanos aggregate at millisecond resolution
    scores = values_of(live, "score")
    assert result["avg"]["value"] == pytest.approx(sum(scores) / len(scores))
    last = max(values_of(live, "ts"))
    assert result["fmt"]["value_as_string"] == datetime.fromtimestamp(last / 1000, tz=UTC).strftime(
        "%Y-%m-%d"
    )


def test_stats_and_extended_stats(corpus):
    searchers, live = corpus
    result = run(
        {"s": {"stats": {"field": "price"}}, "e": {"extended_stats": {"field": "price", "sigma": 3}}},
        searchers,
    )
    prices = values_of(live, "price")
    count, total = len(prices), sum(prices)
    assert list(result["s"]) == ["count", "min", "max", "avg", "sum"]
    assert result["s"]["count"] == count and result["s"]["min"] == min(prices)
    assert result["s"]["sum"] == pytest.approx(total) and result["s"]["avg"] == pytest.approx(total / count)
    mean = total / count
    variance = sum((p - mean) ** 2 for p in prices) / count
    sampling = sum((p - mean) ** 2 for p in prices) / (count - 1)
    assert result["e"]["variance"] == pytest.approx(variance)
    assert result["e"]["std_deviation_sampling"] == pytest.approx(math.sqrt(sampling))
    assert result["e"]["std_deviation_bounds"]["upper"] == pytest.approx(mean + 3 * math.sqrt(variance))


def test_empty_metrics_render_nulls(corpus):
    searchers, _ = corpus
    body = {k: {k: {"field": "n"}} for k in ("min", "max", "sum", "avg", "value_count", "stats")}
    body["u"] = {"min": {"field": "unmapped"}}
    result = run(body, searchers, select=lambda d: False)
    assert result == {
        "min": {"value": None},
        "max": {"value": None},
        "sum": {"value": 0.0},
        "avg": {"value": None},
        "value_count": {"value": 0},
        "stats": {"count": 0, "min": None, "max": None, "avg": None, "sum": 0.0},
        "u": {"value": None},
    }


def test_metric_missing_value_counts_documents_without_the_field(corpus):
    searchers, live = corpus
    result = run({"s": {"sum": {"field": "price", "missing": 1000}}}, searchers)["s"]
    expected = sum(d.get("price", 1000) for d in live)
    assert result["value"] == pytest.approx(expected)


def test_meta_and_typed_keys(corpus):
    searchers, _ = corpus
    body = {
        "t": {
            "terms": {"field": "tag"},
            "meta": {"owner": "me"},
            "aggs": {"m": {"max": {"field": "price"}}, "n": {"terms": {"field": "n"}}},
        },
        "d": {"terms": {"field": "price"}},
    }
    result = run(body, searchers)
    assert list(result["t"]) == ["meta", "doc_count_error_upper_bound", "sum_other_doc_count", "buckets"]
    assert result["t"]["meta"] == {"owner": "me"}
    tree = parse_aggs(body, MAPPING)
    typed = typed_keys(result, tree)
    assert set(typed) == {"sterms#t", "dterms#d"}
    assert {"max#m", "lterms#n"} <= set(typed["sterms#t"]["buckets"][0])


# ---- histograms -----------------------------------------------------------------------------------


def test_histogram_fills_gaps_and_extended_bounds(corpus):
    searchers, live = corpus
    result = run(
        {
            "h": {
                "histogram": {
                    "field": "n",
                    "interval": 25,
                    "offset": 5,
                    "extended_bounds": {"min": -100, "max": 200},
                }
            }
        },
        searchers,
    )["h"]
    counts = Counter(
        k for d in live for k in {math.floor((v - 5) / 25) * 25 + 5 for v in as_list(d.get("n", []))}
    )
    keys = [b["key"] for b in result["buckets"]]
    assert keys == [float(k) for k in range(-120, 181, 25)]
    assert {b["key"]: b["doc_count"] for b in result["buckets"] if b["doc_count"]} == counts
    assert all(isinstance(k, float) for k in keys)


def test_histogram_min_doc_count_keyed_and_order(corpus):
    searchers, live = corpus
    body = {
        "h": {
            "histogram": {
                "field": "price",
                "interval": 10,
                "min_doc_count": 1,
                "keyed": True,
                "order": {"_count": "desc"},
            }
        }
    }
    result = run(body, searchers)["h"]["buckets"]
    counts = Counter(math.floor(p / 10) * 10.0 for p in values_of(live, "price"))
    assert list(result) == [f"{k}" for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert result["10.0"] == {"key": 10.0, "doc_count": counts[10.0]}


def _calendar_floor(millis: int, unit: str, zone=UTC) -> int:
    local = datetime.fromtimestamp(millis / 1000, tz=zone)
    if unit == "day":
        local = local.replace(hour=0, minute=0, second=0, microsecond=0)
    elif unit == "week":
        local = (local - timedelta(days=local.weekday())).replace(hour=0, minute=0, second=0, microsecond=0)
    elif unit == "month":
        local = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    local = local.replace(tzinfo=None).replace(tzinfo=zone)  # re-resolve the offset of the wall time
    return int(local.timestamp() * 1000)


@pytest.mark.parametrize("unit", ["day", "week", "month"])
def test_date_histogram_calendar_intervals(corpus, unit):
    searchers, live = corpus
    result = run(
        {"h": {"date_histogram": {"field": "ts", "calendar_interval": unit, "min_doc_count": 1}}}, searchers
    )["h"]["buckets"]
    counts = Counter(_calendar_floor(t, unit) for t in values_of(live, "ts"))
    assert [(b["key"], b["doc_count"]) for b in result] == sorted(counts.items())
    assert result[0]["key_as_string"] == iso(result[0]["key"]) and list(result[0]) == [
        "key_as_string",
        "key",
        "doc_count",
    ]


def test_date_histogram_time_zones_and_format(corpus):
    searchers, live = corpus
    paris = ZoneInfo("Europe/Paris")
    result = run(
        {
            "h": {
                "date_histogram": {
                    "field": "ts",
                    "calendar_interval": "1d",
                    "time_zone": "Europe/Paris",
                    "min_doc_count": 1,
                }
            }
        },
        searchers,
    )["h"]["buckets"]
    counts = Counter(_calendar_floor(t, "day", paris) for t in values_of(live, "ts"))
    assert [(b["key"], b["doc_count"]) for b in result] == sorted(counts.items())
    every_day = run(
        {
            "h": {
                "date_histogram": {
                    "field": "ts",
                    "calendar_interval": "day",
                    "time_zone": "Europe/Paris",
                    "extended_bounds": {"min": "2020-03-01", "max": "2020-04-02"},
                }
            }
        },
        searchers,
    )["h"]["buckets"]
    assert every_day[-1]["key_as_string"] == "2020-04-02T00:00:00.000+02:00"
    march = [b for b in every_day if b["key"] >= 1585350000000][:3]  # DST starts 2020-03-29 in Paris
    assert [(b["key"], b["key_as_string"]) for b in march] == [
        (1585350000000, "2020-03-28T00:00:00.000+01:00"),
        (1585436400000, "2020-03-29T00:00:00.000+01:00"),
        (1585519200000, "2020-03-30T00:00:00.000+02:00"),
    ]
    fixed = run(
        {
            "h": {
                "date_histogram": {
                    "field": "ts",
                    "fixed_interval": "12h",
                    "time_zone": "-05:00",
                    "format": "yyyy-MM-dd HH",
                    "min_doc_count": 1,
                }
            }
        },
        searchers,
    )["h"]
    shift = 5 * 3600_000
    expected = Counter((t - shift) // 43_200_000 * 43_200_000 + shift for t in values_of(live, "ts"))
    assert [(b["key"], b["doc_count"]) for b in fixed["buckets"]] == sorted(expected.items())
    assert fixed["buckets"][0]["key_as_string"].endswith((" 00", " 12"))


def test_date_histogram_fills_empty_days_and_extended_bounds(corpus):
    searchers, live = corpus
    result = run(
        {
            "h": {
                "date_histogram": {
                    "field": "ts",
                    "calendar_interval": "day",
                    "extended_bounds": {"min": "2019-12-30", "max": "2020-04-02"},
                }
            }
        },
        searchers,
        select=lambda d: d.get("tag") == "zz",
    )["h"]["buckets"]
    days = [b["key"] for b in result]
    assert days[0] == BASE - 2 * 86_400_000 and days[-1] == BASE + 92 * 86_400_000
    assert np.all(np.diff(days) == 86_400_000)
    assert sum(b["doc_count"] for b in result) == sum(1 for d in live if d.get("tag") == "zz" and "ts" in d)


def test_nested_sub_aggregations_three_levels(corpus):
    searchers, live = corpus
    body = {
        "m": {
            "date_histogram": {"field": "ts", "calendar_interval": "month"},
            "aggs": {
                "t": {
                    "terms": {"field": "tag", "size": 20},
                    "aggs": {"f": {"terms": {"field": "flag"}, "aggs": {"p": {"sum": {"field": "price"}}}}},
                }
            },
        }
    }
    result = run(body, searchers)["m"]["buckets"]
    expected = defaultdict(float)
    for d in live:
        if "ts" in d and "flag" in d:
            for tag in set(as_list(d.get("tag", []))):
                expected[(_calendar_floor(d["ts"], "month"), tag, int(d["flag"]))] += d.get("price", 0.0)
    got = {
        (m["key"], t["key"], f["key"]): f["p"]["value"]
        for m in result
        for t in m["t"]["buckets"]
        for f in t["f"]["buckets"]
    }
    assert got.keys() == expected.keys()
    assert all(got[k] == pytest.approx(v) for k, v in expected.items())


# ---- ranges ---------------------------------------------------------------------------------------


def test_range_and_date_range(corpus):
    searchers, live = corpus
    body = {
        "r": {
            "range": {
                "field": "price",
                "ranges": [{"from": 30}, {"to": 10}, {"from": 10, "to": 30, "key": "mid"}],
            },
            "aggs": {"c": {"value_count": {"field": "price"}}},
        },
        "d": {
            "date_range": {
                "field": "ts",
                "format": "yyyy-MM-dd",
                "keyed": True,
                "ranges": [{"to": "2020-02-01"}, {"from": "2020-02-01"}],
            }
        },
    }
    result = run(body, searchers)
    prices = values_of(live, "price")
    assert [(b["key"], b["doc_count"]) for b in result["r"]["buckets"]] == [
        ("*-10.0", sum(p < 10 for p in prices)),
        ("mid", sum(10 <= p < 30 for p in prices)),
        ("30.0-*", sum(p >= 30 for p in prices)),
    ]
    assert result["r"]["buckets"][1] == {
        "key": "mid",
        "from": 10.0,
        "to": 30.0,
        "doc_count": result["r"]["buckets"][1]["doc_count"],
        "c": {"value": result["r"]["buckets"][1]["doc_count"]},
    }
    feb = 1580515200000
    assert result["d"]["buckets"]["*-2020-02-01"] == {
        "to": float(feb),
        "to_as_string": "2020-02-01",
        "doc_count": sum(t < feb for t in values_of(live, "ts")),
    }


# ---- filter / filters -----------------------------------------------------------------------------


def test_filter_and_filters(tmp_path):
    pytest.importorskip("leafsearch.search.matching", exc_type=ImportError)
    from leafsearch.index.mapping import Mapping

    mapping = Mapping.from_body(
        {
            "properties": {
                "tag": {"type": "keyword"},
                "n": {"type": "long"},
                "price": {"type": "double"},
                "flag": {"type": "boolean"},
            }
        }
    )
    docs = [{k: v for k, v in d.items() if k in ("id", "tag", "n", "price", "flag")} for d in make_docs(200)]
    searchers = build_searchers(docs, tmp_path, parse=lambda d: mapping.parse_document(orjson.dumps(d)))
    live = [d for d in docs if not is_deleted(d)]
    body = {
        "f": {"filter": {"term": {"tag": "a"}}, "aggs": {"s": {"sum": {"field": "n"}}}},
        "fs": {
            "filters": {
                "filters": {"cheap": {"range": {"price": {"lt": 10}}}, "a": {"term": {"tag": "a"}}},
                "other_bucket_key": "rest",
            }
        },
        "anon": {"filters": {"filters": [{"term": {"flag": True}}, {"term": {"flag": False}}]}},
    }
    result = run(body, searchers, mapping=mapping)
    with_a = [d for d in live if "a" in as_list(d.get("tag", []))]
    assert result["f"] == {"doc_count": len(with_a), "s": {"value": float(sum(values_of(with_a, "n")))}}
    cheap = [d for d in live if d.get("price", 99) < 10]
    assert list(result["fs"]["buckets"]) == ["a", "cheap", "rest"]
    assert result["fs"]["buckets"]["cheap"] == {"doc_count": len(cheap)}
    rest = [d for d in live if d not in cheap and d not in with_a]
    assert result["fs"]["buckets"]["rest"] == {"doc_count": len(rest)}
    assert result["anon"]["buckets"] == [
        {"doc_count": sum(1 for d in live if d.get("flag") is True)},
        {"doc_count": sum(1 for d in live if d.get("flag") is False)},
    ]


# ---- composite ------------------------------------------------------------------------------------


def walk(body_sources: list, searchers, size: int, sub=None) -> list[dict]:
    pages, after = [], None
    while True:
        body = {"sources": body_sources, "size": size}
        if after is not None:
            body["after"] = after
        agg = {"c": {"composite": body, **({"aggs": sub} if sub else {})}}
        result = run(agg, searchers)["c"]
        if not result["buckets"]:
            assert "after_key" not in result
            return pages
        assert len(result["buckets"]) <= size
        assert result["after_key"] == result["buckets"][-1]["key"]
        pages.extend(result["buckets"])
        after = result["after_key"]


def test_composite_walk_yields_every_bucket_once_in_order(corpus):
    searchers, live = corpus
    sources = [
        {"tag": {"terms": {"field": "tag", "missing_bucket": True}}},
        {"n": {"terms": {"field": "n", "order": "desc"}}},
    ]
    buckets = walk(sources, searchers, size=7, sub={"p": {"max": {"field": "price"}}})
    expected = Counter()
    best = {}
    for d in live:
        for tag in set(as_list(d["tag"])) if "tag" in d else {None}:
            for n in set(as_list(d.get("n", []))):
                expected[(tag, n)] += 1
                if "price" in d:
                    best[(tag, n)] = max(best.get((tag, n), -math.inf), d["price"])
    order = sorted(expected, key=lambda k: (k[0] is not None, (k[0] or "").encode(), -k[1]))
    assert [(b["key"]["tag"], b["key"]["n"]) for b in buckets] == order
    assert [b["doc_count"] for b in buckets] == [expected[k] for k in order]
    assert [b["p"]["value"] for b in buckets] == [best.get(k) for k in order]


def test_composite_date_histogram_source_with_format(corpus):
    searchers, live = corpus
    sources = [
        {"day": {"date_histogram": {"field": "ts", "calendar_interval": "1w", "format": "yyyy-MM-dd"}}},
        {"flag": {"terms": {"field": "flag"}}},
    ]
    buckets = walk(sources, searchers, size=5)
    expected = Counter()
    for d in live:
        if "ts" in d and "flag" in d:
            week = datetime.fromtimestamp(_calendar_floor(d["ts"], "week") / 1000, tz=UTC).strftime(
                "%Y-%m-%d"
            )
            expected[(week, d["flag"])] += 1
    assert [((b["key"]["day"], b["key"]["flag"]), b["doc_count"]) for b in buckets] == sorted(
        expected.items()
    )


def test_composite_histogram_source_raw_keys(corpus):
    searchers, live = corpus
    result = run(
        {
            "c": {
                "composite": {
                    "size": 100,
                    "sources": [{"h": {"histogram": {"field": "price", "interval": 20}}}],
                }
            }
        },
        searchers,
    )["c"]
    counts = Counter(math.floor(p / 20) * 20.0 for p in values_of(live, "price"))
    assert [(b["key"]["h"], b["doc_count"]) for b in result["buckets"]] == sorted(counts.items())


# ---- refusals -------------------------------------------------------------------------------------


def refusal(body: dict, mapping=MAPPING) -> ElasticError:
    with pytest.raises(ElasticError) as info:
        parse_aggs(body, mapping, index="idx")
    return info.value


def root(err: ElasticError) -> tuple[int, str, str]:
    cause = err.caused_by or err
    return err.status, err.error_type, cause.error_type, cause.reason


def test_unknown_type_suggests_like_elasticsearch():
    err = refusal({"a": {"term": {"field": "tag"}}})
    assert (err.status, err.error_type, err.reason) == (
        400,
        "parsing_exception",
        "Unknown aggregation type [term] did you mean [terms]?",
    )
    assert err.body()["error"]["caused_by"]["type"] == "named_object_not_found_exception"
    assert refusal({"a": {"foo": {}}}).reason == "Unknown aggregation type [foo]"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"a": {"avg": {}}},
            (
                400,
                "illegal_argument_exception",
                "illegal_argument_exception",
                "Required one of fields [field, script], but none were specified. ",
            ),
        ),
        (
            {"a": {"terms": {"field": "msg"}}},
            (
                400,
                "search_phase_execution_exception",
                "illegal_argument_exception",
                "Fielddata is disabled on [msg] in [idx]. Text fields are not optimised "
                "for operations that require per-document field data like aggregations "
                "and sorting, so these operations are disabled by default. Please use a "
                "keyword field instead. Alternatively, set fielddata=true on [msg] in "
                "order to load field data by uninverting the inverted index. Note that "
                "this can use significant memory.",
            ),
        ),
        (
            {"a": {"sum": {"field": "tag"}}},
            (
                400,
                "search_phase_execution_exception",
                "illegal_argument_exception",
                "Field [tag] of type [keyword] is not supported for aggregation [sum]",
            ),
        ),
        (
            {"a": {"terms": {"field": "nodv"}}},
            (
                400,
                "search_phase_execution_exception",
                "illegal_argument_exception",
                "Can't load fielddata on [nodv] because fielddata is unsupported on "
                "fields of type [keyword]. Use doc values instead.",
            ),
        ),
        (
            {"a": {"date_histogram": {"field": "ts", "calendar_interval": "2d"}}},
            (
                400,
                "x_content_parse_exception",
                "illegal_argument_exception",
                "The supplied interval [2d] could not be parsed as a calendar interval.",
            ),
        ),
        (
            {"a": {"date_histogram": {"field": "ts"}}},
            (
                400,
                "search_phase_execution_exception",
                "illegal_argument_exception",
                "Invalid interval specified, must be non-null and non-empty",
            ),
        ),
        (
            {"a": {"histogram": {"field": "n", "interval": 0}}},
            (
                400,
                "x_content_parse_exception",
                "illegal_argument_exception",
                "[interval] must be >0 for histogram aggregation [a]",
            ),
        ),
        (
            {"a": {"terms": {"field": "tag", "size": 0}}},
            (
                400,
                "x_content_parse_exception",
                "illegal_argument_exception",
                "[size] must be greater than 0. Found [0] in [a]",
            ),
        ),
        (
            {"a": {"terms": {"field": "tag", "order": {"nope": "asc"}}}},
            (
                400,
                "search_phase_execution_exception",
                "aggregation_execution_exception",
                "Invalid aggregator order path [nope]. The provided aggregation [nope] either does not "
                "exist, or is a pipeline aggregation and cannot be used to sort the buckets.",
            ),
        ),
        (
            {
                "a": {
                    "terms": {"field": "tag"},
                    "aggs": {"c": {"composite": {"sources": [{"x": {"terms": {"field": "n"}}}]}}},
                }
            },
            (
                400,
                "search_phase_execution_exception",
                "illegal_argument_exception",
                "[composite] aggregation cannot be used with a parent aggregation of type: "
                "[TermsAggregatorFactory]",
            ),
        ),
        (
            {"a": {"max": {"field": "n"}, "aggs": {"b": {"min": {"field": "n"}}}}},
            (
                400,
                "aggregation_initialization_exception",
                "aggregation_initialization_exception",
                "Aggregator [a] of type [max] cannot accept sub-aggregations",
            ),
        ),
        (
            {"a": {"filters": {"filters": {}}}},
            (400, "illegal_argument_exception", "illegal_argument_exception", "[filters] cannot be empty."),
        ),
        (
            {"a": {"composite": {"sources": []}}},
            (
                400,
                "illegal_argument_exception",
                "illegal_argument_exception",
                "Composite [sources] cannot be null or empty",
            ),
        ),
    ],
)
def test_refusals(body, expected):
    assert root(refusal(body)) == expected


def test_structural_refusals():
    assert refusal({"a": {}}).reason == "Missing definition for aggregation [a]"
    assert refusal({"a": {"max": {"field": "n"}, "min": {"field": "n"}}}).reason == (
        "Found two aggregation type definitions in [a]: [max] and [min]"
    )
    assert refusal({"a[1]": {"max": {"field": "n"}}}).reason.startswith("Invalid aggregation name [a[1]]")
    unknown = refusal({"a": {"terms": {"field": "tag", "bogus": 1}}})
    assert (unknown.error_type, unknown.reason) == (
        "x_content_parse_exception",
        "[terms] unknown field [bogus]",
    )


# ---- a large segment (its speed is measured by bench, W1) -----------------------------------------


def test_terms_and_date_histogram_over_a_large_segment(tmp_path):
    n = 200_000
    rng = np.random.default_rng(3)
    writer = SegmentWriter(n)
    ids = to_term_array([str(i) for i in range(n)])
    writer.set_ids(ids, np.arange(n), np.ones(n, dtype=np.int64))
    writer.set_sources([b"{}"] * n)
    terms = to_term_array(sorted(f"tag{i:02d}" for i in range(50)))
    docs = np.arange(n, dtype=np.int64)
    tag_of_doc = rng.integers(0, 50, n)
    writer.add_keyword("tag", terms, build_doc_values(docs, tag_of_doc, n, dedupe=True))
    stamps = BASE + rng.integers(0, 365 * 86_400_000, n)
    writer.add_numeric("ts", "long", build_doc_values(docs, stamps, n, dedupe=False))
    writer.write(tmp_path / "big")
    view = SegmentView(Segment(tmp_path / "big"), None, 0, n)
    ctx = SimpleNamespace(mapping=MAPPING, now_millis=NOW, searcher=None)
    tree = parse_aggs(
        {
            "t": {"terms": {"field": "tag"}},
            "d": {"date_histogram": {"field": "ts", "calendar_interval": "day"}},
        },
        MAPPING,
    )
    result = reduce(tree, [collect(tree, view, view.live_docs, ctx)])
    tags = np.bincount(tag_of_doc, minlength=50)
    expected = sorted(((f"tag{i:02d}", int(c)) for i, c in enumerate(tags)), key=lambda kc: (-kc[1], kc[0]))
    assert [(b["key"], b["doc_count"]) for b in result["t"]["buckets"]] == expected[:10]
    assert result["t"]["sum_other_doc_count"] == sum(c for _, c in expected[10:])
    days = np.bincount((stamps - BASE) // 86_400_000, minlength=365)
    assert [b["doc_count"] for b in result["d"]["buckets"]] == days.tolist()


# ---- with the real mapping ------------------------------------------------------------------------


def test_with_the_index_mapping_and_dynamic_fields(tmp_path):
    from leafsearch.index.mapping import Mapping

    mapping = Mapping.from_body(
        {
            "properties": {
                "when": {"type": "date", "format": "yyyy-MM-dd"},
                "price": {"type": "scaled_float", "scaling_factor": 10},
            }
        }
    )
    docs = [{"when": f"2024-01-0{i % 3 + 1}", "price": i * 1.25, "tag": "xy"[i % 2]} for i in range(9)]
    buffer = IndexBuffer()
    for i, doc in enumerate(docs):
        buffer.add(str(i), mapping.parse_document(orjson.dumps(doc)), i, 1, None)
    segment = segment_from_buffer(buffer, tmp_path / "seg")
    searcher = Searcher(0, [SegmentView(segment, None, 0, segment.max_doc)], generation=1)
    body = {
        "d": {
            "date_histogram": {"field": "when", "calendar_interval": "day"},
            "aggs": {"p": {"max": {"field": "price"}}},
        },
        "t": {"terms": {"field": "tag.keyword"}},
    }
    result = run(body, [searcher], mapping=mapping)
    # scaled_float keeps Math.round(value * scaling_factor): 8.75 is stored as 88, read back as 8.8
    assert [(b["key_as_string"], b["doc_count"], b["p"]["value"]) for b in result["d"]["buckets"]] == [
        ("2024-01-01", 3, 7.5),
        ("2024-01-02", 3, 8.8),
        ("2024-01-03", 3, 10.0),
    ]
    assert {b["key"]: b["doc_count"] for b in result["t"]["buckets"]} == {"x": 5, "y": 4}
    with pytest.raises(ElasticError) as info:
        parse_aggs({"t": {"terms": {"field": "tag"}}}, mapping, index="shop")
    assert info.value.caused_by.reason.startswith("Fielddata is disabled on [tag] in [shop].")
