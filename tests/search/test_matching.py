"""Query execution against a small two-segment shard: which documents each query and option matches,
what scores the constant-scored and compound queries give, and the shard-level refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import pytest

from leafsearch.errors import ElasticError, QueryShardError
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.mapping import Mapping
from leafsearch.index.searcher import Searcher, SegmentView
from leafsearch.index.segment_build import segment_from_buffer
from leafsearch.request.query_dsl import parse_query
from leafsearch.search.matching import QueryContext, execute, min_should_match, prepare

NOW = 1578052800000  # 2020-01-03T12:00:00Z
NOT_SEARCHABLE = "Cannot search on field [{}] since it is not indexed nor has doc values."

MAPPING = {
    "properties": {
        "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
        "tag": {"type": "keyword"},
        "code": {"type": "keyword", "normalizer": "lowercase"},
        "n": {"type": "integer"},
        "big": {"type": "long"},
        "price": {"type": "float"},
        "rating": {"type": "double"},
        "cost": {"type": "scaled_float", "scaling_factor": 100},
        "day": {"type": "date"},
        "stamp": {"type": "date", "format": "yyyy/MM/dd"},
        "ok": {"type": "boolean"},
        "user": {"properties": {"name": {"type": "keyword"}, "age": {"type": "integer"}}},
        "secret": {"type": "text", "index": False},
        "dv_only": {"type": "keyword", "index": False},
        "hidden": {"type": "keyword", "index": False, "doc_values": False},
    }
}

DOCS = [
    {
        "title": "The quick brown fox",
        "tag": ["red", "blue"],
        "code": "AbC",
        "n": 1,
        "big": 9007199254740993,
        "price": 1.5,
        "rating": 0.1,
        "cost": 1.25,
        "day": "2020-01-01",
        "stamp": "2020/01/01",
        "ok": True,
        "user": {"name": "alice", "age": 30},
        "secret": "hidden words",
        "dv_only": "x",
        "hidden": "h",
    },
    {
        "title": "Quick quick fox jumps over the lazy dog",
        "tag": "red",
        "code": "abd",
        "n": 2,
        "price": 2.25,
        "cost": 3.5,
        "day": "2020-01-02T10:00:00Z",
        "ok": False,
        "user": {"name": "bob"},
    },
    {"title": "lazy dog sleeps", "tag": "green", "n": 3, "day": "2020-01-03", "ok": True},
    {
        "title": "brown dog and quick cat",
        "n": 10,
        "price": 10.0,
        "rating": 2.5,
        "day": "2019-12-31T23:59:59.999Z",
    },
    {"title": "fox", "tag": "Blue", "n": -5, "dv_only": "y"},
    {"n": 7},
]


def build_shard(
    folder: Path,
    mapping: Mapping,
    segments: list[list[dict]],
    deleted: frozenset[str] = frozenset(),
    first_id: int = 0,
) -> Searcher:
    """A shard snapshot with one segment per list of documents; ids count up from `first_id`."""
    views, base, doc_id = [], 0, first_id
    for number, docs in enumerate(segments):
        buffer = IndexBuffer()
        ids = []
        for doc in docs:
            ids.append(str(doc_id))
            buffer.add(str(doc_id), mapping.parse_document(orjson.dumps(doc)), doc_id, 1, None)
            doc_id += 1
        segment = segment_from_buffer(buffer, folder / f"seg{number}")
        live = np.array([i not in deleted for i in ids], dtype=bool)
        views.append(SegmentView(segment, None if live.all() else live, base, int(live.sum())))
        base += segment.max_doc
    return Searcher(0, views, generation=1)


def run(
    searcher: Searcher,
    mapping: Mapping,
    body: dict | None,
    *,
    needs_scores: bool = True,
    default_fields: tuple[str, ...] = ("*",),
) -> dict[str, float]:
    """Live matching ids of a query with their scores (0.0 when scores are not needed)."""
    ctx = QueryContext(
        mapping,
        searcher,
        now_millis=NOW,
        needs_scores=needs_scores,
        index_name="idx",
        default_fields=default_fields,
    )
    planned = prepare(parse_query(body), ctx)
    out: dict[str, float] = {}
    for view in searcher.views:
        mask, scores = execute(planned, view, ctx)
        assert mask.dtype == bool and mask.shape == (view.max_doc,)
        if needs_scores:
            assert scores is not None and scores.dtype == np.float32
        else:
            assert scores is None
        docs = np.flatnonzero(mask if view.live is None else mask & view.live)
        for doc, doc_id in zip(docs.tolist(), view.segment.doc_ids(docs), strict=True):
            out[doc_id] = float(scores[doc]) if scores is not None else 0.0
    return out


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    mapping = Mapping.from_body(MAPPING)
    searcher = build_shard(tmp_path_factory.mktemp("shard"), mapping, [DOCS[:3], DOCS[3:]])
    return mapping, searcher


@pytest.fixture
def ids(shard):
    mapping, searcher = shard

    def matching(body: dict, **kwargs) -> set[str]:
        return set(run(searcher, mapping, body, **kwargs))

    return matching


@pytest.fixture
def scores(shard):
    mapping, searcher = shard
    return lambda body, **kwargs: run(searcher, mapping, body, **kwargs)


@pytest.fixture
def refusal(shard):
    mapping, searcher = shard

    def refused(body: dict) -> ElasticError:
        with pytest.raises(ElasticError) as info:
            run(searcher, mapping, body)
        return info.value

    return refused


ALL = {"0", "1", "2", "3", "4", "5"}


# -- match_all, match_none, scores ------------------------------------------------------------


def test_match_all_and_none(ids, scores):
    assert scores({"match_all": {}}) == dict.fromkeys(ALL, 1.0)
    assert scores({"match_all": {"boost": 2.5}}) == dict.fromkeys(ALL, 2.5)
    assert scores(None) == dict.fromkeys(ALL, 1.0)
    assert ids({"match_none": {}}) == set()


def test_without_scores_masks_are_the_same(ids):
    body = {"bool": {"must": {"match": {"title": "quick"}}, "should": {"term": {"tag": "red"}}}}
    assert ids(body, needs_scores=False) == ids(body) == {"0", "1", "3"}


# -- match ----------------------------------------------------------------------------------


def test_match_or_and(ids):
    assert ids({"match": {"title": "quick fox"}}) == {"0", "1", "3", "4"}
    assert ids({"match": {"title": {"query": "QUICK, Fox!", "operator": "and"}}}) == {"0", "1"}


@pytest.mark.parametrize(
    ("msm", "expected"),
    [
        ("75%", {"0", "1"}),
        ("-25%", {"0", "1"}),
        (2, {"0", "1", "3"}),
        ("50%", {"0", "1", "3"}),
        ("-1", {"0", "1"}),
        ("-3", {"0", "1", "2", "3", "4"}),
        ("3<90%", {"0", "1"}),
        ("5<90%", set()),
    ],
)
def test_match_minimum_should_match(ids, msm, expected):
    # quick brown fox lazy: doc 0 and 1 hold three of the words, doc 3 two, docs 2 and 4 one.
    body = {"match": {"title": {"query": "quick brown fox lazy", "minimum_should_match": msm}}}
    assert ids(body) == expected


def test_minimum_should_match_arithmetic():
    assert min_should_match(4, "75%") == 3
    assert min_should_match(4, "-25%") == 3
    assert min_should_match(7, "-25%") == 6  # 7 - int(1.75)
    assert min_should_match(3, "2<-1 5<50%") == 2
    assert min_should_match(10, "2<-1 5<50%") == 5
    assert min_should_match(2, "5") == 5


def test_match_zero_terms_query(ids):
    assert ids({"match": {"title": " ,, "}}) == set()
    assert ids({"match": {"title": {"query": "!!", "zero_terms_query": "all"}}}) == ALL


def test_match_on_non_text_fields_is_a_term_query(ids):
    assert ids({"match": {"title.raw": "fox"}}) == {"4"}
    assert ids({"match": {"tag": "red"}}) == {"0", "1"}
    assert ids({"match": {"code": "ABD"}}) == {"1"}
    assert ids({"match": {"n": "3"}}) == {"2"}
    assert ids({"match": {"day": "2020-01-02"}}) == {"1"}
    assert ids({"match": {"ok": True}}) == {"0", "2"}


def test_match_lenient(ids, refusal):
    assert ids({"match": {"n": {"query": "abc", "lenient": True}}}) == set()
    error = refusal({"match": {"n": "abc"}})
    assert isinstance(error, QueryShardError)
    assert error.reason == 'failed to create query: For input string: "abc"'
    assert error.caused_by.error_type == "number_format_exception"
    assert error.extra == {"index_uuid": "_na_", "index": "idx"}
    assert error.body()["error"]["root_cause"][0]["type"] == "query_shard_exception"


def test_match_fuzziness(ids):
    assert ids({"match": {"title": {"query": "quikc", "fuzziness": "AUTO"}}}) == {"0", "1", "3"}
    assert ids({"match": {"title": {"query": "quikc", "fuzziness": 0}}}) == set()
    assert ids({"match": {"title": {"query": "fix", "fuzziness": 1}}}) == {"0", "1", "4"}
    assert ids({"match": {"title": {"query": "fix", "fuzziness": "AUTO"}}}) == {
        "0",
        "1",
        "4",
    }  # 3-5 letters: 1 edit
    assert ids({"match": {"title": {"query": "fx", "fuzziness": "AUTO"}}}) == set()  # under 3 letters: exact
    assert ids({"match": {"title": {"query": "fix", "fuzziness": "AUTO:4,7"}}}) == set()


def test_match_unknown_analyzer(refusal):
    error = refusal({"match": {"title": {"query": "x", "analyzer": "nope"}}})
    assert error.error_type == "query_shard_exception"
    assert "nope" in error.reason


def test_match_keyword_analyzer(ids):
    assert ids({"match": {"title": {"query": "quick fox", "analyzer": "keyword"}}}) == set()
    assert ids({"match": {"title": {"query": "quick", "analyzer": "keyword"}}}) == {"0", "1", "3"}


# -- phrases --------------------------------------------------------------------------------


def test_match_phrase(ids):
    assert ids({"match_phrase": {"title": "quick brown"}}) == {"0"}
    assert ids({"match_phrase": {"title": "lazy dog"}}) == {"1", "2"}
    assert ids({"match_phrase": {"title": "brown quick"}}) == set()
    assert ids({"match_phrase": {"title": "fox"}}) == {"0", "1", "4"}
    assert ids({"match_phrase": {"tag": "red"}}) == {"0", "1"}


def test_match_phrase_slop(ids):
    assert ids({"match_phrase": {"title": {"query": "quick fox", "slop": 0}}}) == {"1"}
    assert ids({"match_phrase": {"title": {"query": "quick fox", "slop": 1}}}) == {"0", "1"}
    # Reversed words cost two moves.
    assert ids({"match_phrase": {"title": {"query": "brown quick", "slop": 1}}}) == set()
    assert ids({"match_phrase": {"title": {"query": "brown quick", "slop": 2}}}) == {"0", "3"}
    assert ids({"match_phrase": {"title": {"query": "quick lazy dog", "slop": 5}}}) == {"1"}


def test_sloppy_phrase_scores_closer_matches_higher(scores):
    result = scores({"match_phrase": {"title": {"query": "brown quick", "slop": 3}}})
    # doc 0: "quick brown" (reversed, distance 2); doc 3: "brown dog and quick" (distance 2 too, but a
    # longer field): both match, and the exact-distance weights are 1/(1+2).
    assert set(result) == {"0", "3"}
    closer = scores({"match_phrase": {"title": {"query": "quick brown", "slop": 3}}})
    assert closer["0"] > result["0"]


def test_match_phrase_prefix(ids):
    assert ids({"match_phrase_prefix": {"title": "quick b"}}) == {"0"}
    assert ids({"match_phrase_prefix": {"title": "laz"}}) == {"1", "2"}
    assert ids({"match_phrase_prefix": {"title": "dog sl"}}) == {"2"}
    assert ids({"match_phrase_prefix": {"title": "dog zz"}}) == set()


# -- multi_match ----------------------------------------------------------------------------


def test_multi_match_types(ids, scores):
    assert ids({"multi_match": {"query": "brown green", "fields": ["title", "tag"]}}) == {
        "0",
        "3",
    }  # whole keyword
    assert ids({"multi_match": {"query": "green", "fields": ["title", "tag"]}}) == {"2"}
    assert ids({"multi_match": {"query": "lazy dog", "fields": ["title"], "type": "phrase"}}) == {"1", "2"}
    assert ids({"multi_match": {"query": "quick b", "fields": ["title"], "type": "phrase_prefix"}}) == {"0"}
    assert ids(
        {
            "multi_match": {
                "query": "alice quick",
                "fields": ["title", "user.name"],
                "type": "cross_fields",
                "operator": "and",
            }
        }
    ) == {"0"}
    best = scores({"multi_match": {"query": "red quick", "fields": ["title", "tag"]}})
    most = scores({"multi_match": {"query": "red quick", "fields": ["title", "tag"], "type": "most_fields"}})
    tied = scores({"multi_match": {"query": "red quick", "fields": ["title", "tag"], "tie_breaker": 0.5}})
    title = scores({"match": {"title": "red quick"}})
    tag = scores({"match": {"tag": "red quick"}})
    assert set(best) == set(most) == {"0", "1", "3"}
    assert tag == {}  # the keyword holds "red", not "red quick"
    assert best == pytest.approx(title)
    assert most == pytest.approx(title)
    assert tied == pytest.approx(title)


def test_multi_match_field_boosts_and_wildcards(scores, ids, refusal):
    plain = scores({"multi_match": {"query": "red", "fields": ["tag"]}})
    boosted = scores({"multi_match": {"query": "red", "fields": ["tag^3"]}})
    assert boosted == pytest.approx({k: 3 * v for k, v in plain.items()})
    # user.age is an integer: "alice" is refused unless the query is lenient.
    error = refusal({"multi_match": {"query": "alice", "fields": ["user.*"]}})
    assert error.reason == 'failed to create query: For input string: "alice"'
    assert ids({"multi_match": {"query": "alice", "fields": ["user.*"], "lenient": True}}) == {"0"}
    # The default field `*` is lenient by itself.
    assert ids({"multi_match": {"query": "alice"}}) == {"0"}


# -- term and terms -------------------------------------------------------------------------


def test_term_per_field_type(ids):
    assert ids({"term": {"title": "quick"}}) == {"0", "1", "3"}
    assert ids({"term": {"title": "Quick"}}) == set()  # text holds lowercased tokens
    assert ids({"term": {"title.raw": "fox"}}) == {"4"}
    assert ids({"term": {"tag": {"value": "red"}}}) == {"0", "1"}
    assert ids({"term": {"tag": "Blue"}}) == {"4"}
    assert ids({"term": {"code": "ABC"}}) == {"0"}  # the normalizer applies to the query too
    assert ids({"term": {"n": 10}}) == {"3"}
    assert ids({"term": {"n": "10"}}) == {"3"}
    assert ids({"term": {"n": "-5"}}) == {"4"}
    assert ids({"term": {"n": 1.5}}) == set()  # a decimal part never matches an integer
    assert ids({"term": {"n": 1.0}}) == {"0"}
    assert ids({"term": {"big": 9007199254740993}}) == {"0"}  # exact beyond double precision
    assert ids({"term": {"price": 2.25}}) == {"1"}
    assert ids({"term": {"rating": 0.1}}) == {"0"}
    assert ids({"term": {"cost": 3.5}}) == {"1"}
    assert ids({"term": {"day": "2020-01-01"}}) == {"0"}  # the whole day
    assert ids({"term": {"day": 1577959200000}}) == {"1"}  # epoch millis: that very millisecond
    assert ids({"term": {"day": 1577923200000}}) == set()
    assert ids({"term": {"stamp": "2020/01/01"}}) == {"0"}
    assert ids({"term": {"ok": True}}) == {"0", "2"}
    assert ids({"term": {"ok": "false"}}) == {"1"}
    assert ids({"term": {"user.name": "bob"}}) == {"1"}
    assert ids({"term": {"_id": "4"}}) == {"4"}
    assert ids({"term": {"_index": "idx"}}) == ALL
    assert ids({"term": {"_index": "other"}}) == set()
    assert ids({"match": {"_id": "3"}}) == {"3"}


def test_term_case_insensitive(ids):
    assert ids({"term": {"tag": {"value": "RED", "case_insensitive": True}}}) == {"0", "1"}
    assert ids({"term": {"tag": {"value": "blue", "case_insensitive": True}}}) == {"0", "4"}
    assert ids({"term": {"title": {"value": "QUICK", "case_insensitive": True}}}) == {"0", "1", "3"}


@pytest.mark.parametrize(
    ("body", "reason", "cause"),
    [
        (
            {"term": {"n": "abc"}},
            'failed to create query: For input string: "abc"',
            "number_format_exception",
        ),
        (
            {"term": {"n": 3000000000}},
            "failed to create query: Value [3000000000] is out of range for an integer",
            "illegal_argument_exception",
        ),
        (
            {"term": {"ok": "maybe"}},
            "failed to create query: Can't parse boolean value [maybe], expected [true] or [false]",
            "illegal_argument_exception",
        ),
        (
            {"term": {"secret": "words"}},
            f"failed to create query: {NOT_SEARCHABLE.format('secret')}",
            "illegal_argument_exception",
        ),
        (
            {"term": {"hidden": "h"}},
            f"failed to create query: {NOT_SEARCHABLE.format('hidden')}",
            "illegal_argument_exception",
        ),
        (
            {"match": {"secret": "words"}},
            f"failed to create query: {NOT_SEARCHABLE.format('secret')}",
            "illegal_argument_exception",
        ),
    ],
)
def test_term_refusals(refusal, body, reason, cause):
    error = refusal(body)
    assert error.error_type == "query_shard_exception"
    assert error.status == 400
    assert error.reason == reason
    assert error.caused_by.error_type == cause
    assert error.body()["error"]["root_cause"][0]["type"] == "query_shard_exception"


def test_doc_values_only_fields_are_searchable(ids):
    assert ids({"term": {"dv_only": "x"}}) == {"0"}
    assert ids({"terms": {"dv_only": ["x", "y"]}}) == {"0", "4"}


def test_terms(ids, scores):
    assert ids({"terms": {"tag": ["red", "green"]}}) == {"0", "1", "2"}
    assert ids({"terms": {"title": ["sleeps", "cat"]}}) == {"2", "3"}
    assert ids({"terms": {"n": [1, 3, "10", 2.5]}}) == {"0", "2", "3"}
    assert ids({"terms": {"price": [1.5, 10]}}) == {"0", "3"}
    assert ids({"terms": {"day": ["2020-01-01", "2020-01-03"]}}) == {"0", "2"}
    assert ids({"terms": {"ok": [False]}}) == {"1"}
    assert ids({"terms": {"_id": ["1", "4", "missing"]}}) == {"1", "4"}
    assert scores({"terms": {"tag": ["red", "blue"], "boost": 2}}) == {"0": 2.0, "1": 2.0}


# -- range ----------------------------------------------------------------------------------


def test_range_numbers(ids):
    assert ids({"range": {"n": {"gte": 2, "lt": 10}}}) == {"1", "2", "5"}
    assert ids({"range": {"n": {"gt": 1.5}}}) == {"1", "2", "3", "5"}
    assert ids({"range": {"n": {"lte": 2.5}}}) == {"0", "1", "4"}
    assert ids({"range": {"n": {"gt": 2, "lte": "7"}}}) == {"2", "5"}
    assert ids({"range": {"n": {"from": 3, "to": 7, "include_upper": False}}}) == {"2"}
    assert ids({"range": {"price": {"gt": 1.5}}}) == {"1", "3"}
    assert ids({"range": {"price": {"gte": 1.5}}}) == {"0", "1", "3"}
    assert ids({"range": {"rating": {"lt": 0.1}}}) == set()
    assert ids({"range": {"cost": {"lt": 3.5}}}) == {"0"}
    assert ids({"range": {"cost": {"gte": 1.249, "lte": 1.25}}}) == {"0"}
    assert ids({"range": {"ok": {"gte": True}}}) == {"0", "2"}
    assert ids({"range": {"n": {"gte": 5, "relation": "within"}}}) == {"3", "5"}


def test_range_dates_with_date_math(ids):
    # now = 2020-01-03T12:00:00Z; gt and lte round up, gte and lt round down.
    assert ids({"range": {"day": {"gte": "now-1d/d"}}}) == {"1", "2"}
    assert ids({"range": {"day": {"lt": "now/d"}}}) == {"0", "1", "3"}
    assert ids({"range": {"day": {"lte": "now-1d/d"}}}) == {"0", "1", "3"}
    assert ids({"range": {"day": {"gt": "now-2d/d"}}}) == {"1", "2"}
    assert ids({"range": {"day": {"gte": "2020-01-01", "lte": "2020-01-01"}}}) == {"0"}
    assert ids({"range": {"day": {"gt": "2020-01-02"}}}) == {"2"}
    assert ids({"range": {"day": {"gte": "2020-01-01||+1d"}}}) == {"1", "2"}
    assert ids({"range": {"day": {"gte": "01/01/2020", "format": "dd/MM/yyyy"}}}) == {"0", "1", "2"}
    assert ids({"range": {"day": {"gte": "2020-01-02T00:00:00", "time_zone": "+10:00"}}}) == {"1", "2"}
    assert ids({"range": {"stamp": {"gte": "2020/01/01"}}}) == {"0"}
    assert ids({"range": {"day": {"gte": 1577923200000}}}) == {"1", "2"}


def test_range_bad_date(refusal):
    error = refusal({"range": {"day": {"gte": "not a date"}}})
    assert error.error_type == "query_shard_exception"
    assert error.reason.startswith("failed to create query: failed to parse date field [not a date]")
    assert error.caused_by.error_type == "parse_exception"
    assert error.body()["error"]["root_cause"][0]["type"] == "parse_exception"


def test_range_keywords_and_text_are_lexicographic(ids):
    # Terms sort by bytes: "Blue" < "blue" < "green" < "red".
    assert ids({"range": {"tag": {"gte": "blue", "lt": "red"}}}) == {"0", "2"}
    assert ids({"range": {"tag": {"gt": "blue"}}}) == {"0", "1", "2"}
    assert ids({"range": {"tag": {"lte": "Blue"}}}) == {"4"}
    assert ids({"range": {"title": {"gte": "s", "lt": "t"}}}) == {"2"}
    assert ids({"range": {"code": {"gte": "ABC", "lte": "ABC"}}}) == {"0"}


# -- exists, ids, prefix, wildcard, regexp ---------------------------------------------------


def test_exists(ids):
    assert ids({"exists": {"field": "price"}}) == {"0", "1", "3"}
    assert ids({"exists": {"field": "title"}}) == {"0", "1", "2", "3", "4"}
    assert ids({"exists": {"field": "tag"}}) == {"0", "1", "2", "4"}
    assert ids({"exists": {"field": "user"}}) == {"0", "1"}  # an object: any of its fields
    assert ids({"exists": {"field": "nope"}}) == set()
    assert ids({"exists": {"field": "_id"}}) == ALL


def test_ids(ids):
    assert ids({"ids": {"values": ["0", "4", "nope"]}}) == {"0", "4"}
    assert ids({"ids": {"values": []}}) == set()


def test_prefix(ids, refusal):
    assert ids({"prefix": {"tag": "r"}}) == {"0", "1"}
    assert ids({"prefix": {"tag": {"value": "b"}}}) == {"0"}
    assert ids({"prefix": {"tag": {"value": "b", "case_insensitive": True}}}) == {"0", "4"}
    assert ids({"prefix": {"title": "qu"}}) == {"0", "1", "3"}
    assert ids({"prefix": {"_id": "1"}}) == {"1"}
    error = refusal({"prefix": {"n": "1"}})
    assert error.error_type == "query_shard_exception"
    assert error.reason == (
        "Can only use prefix queries on keyword, text and wildcard fields - "
        "not on [n] which is of type [integer]"
    )


def test_wildcard(ids, refusal):
    assert ids({"wildcard": {"tag": "?ed"}}) == {"0", "1"}
    assert ids({"wildcard": {"tag": {"value": "*lu*"}}}) == {"0", "4"}
    assert ids({"wildcard": {"tag": {"wildcard": "bl*", "case_insensitive": True}}}) == {"0", "4"}
    assert ids({"wildcard": {"title": "QU*K"}}) == {"0", "1", "3"}  # normalized like the text
    assert ids({"wildcard": {"tag": "gre\\*"}}) == set()
    error = refusal({"wildcard": {"price": "1*"}})
    assert error.reason == (
        "Can only use wildcard queries on keyword, text and wildcard fields - "
        "not on [price] which is of type [float]"
    )


def test_regexp(ids):
    assert ids({"regexp": {"tag": "gr.*"}}) == {"2"}
    assert ids({"regexp": {"title": "(fox|cat)"}}) == {"0", "1", "3", "4"}


def test_unmapped_fields_match_nothing(ids):
    for body in (
        {"match": {"nope": "x"}},
        {"term": {"nope": "x"}},
        {"terms": {"nope": ["x"]}},
        {"range": {"nope": {"gt": 1}}},
        {"prefix": {"nope": "x"}},
        {"wildcard": {"nope": "x*"}},
        {"match_phrase": {"nope": "a b"}},
        {"exists": {"field": "nope"}},
        {"multi_match": {"query": "x", "fields": ["nope"]}},
    ):
        assert ids(body) == set(), body


# -- compound queries -----------------------------------------------------------------------


def test_bool_clauses(ids, scores):
    assert ids({"bool": {"must": {"match": {"title": "quick"}}, "filter": [{"term": {"tag": "red"}}]}}) == {
        "0",
        "1",
    }
    assert ids({"bool": {"should": [{"term": {"tag": "green"}}, {"term": {"n": 10}}]}}) == {"2", "3"}
    assert ids({"bool": {"must_not": {"term": {"tag": "red"}}}}) == {"2", "3", "4", "5"}
    assert ids({"bool": {"filter": {"term": {"tag": "red"}}, "must_not": [{"term": {"n": 2}}]}}) == {"0"}
    # should clauses are optional next to a must clause, unless minimum_should_match says otherwise.
    assert ids({"bool": {"must": {"term": {"title": "dog"}}, "should": {"term": {"tag": "green"}}}}) == {
        "1",
        "2",
        "3",
    }
    assert ids(
        {
            "bool": {
                "must": {"term": {"title": "dog"}},
                "should": {"term": {"tag": "green"}},
                "minimum_should_match": 1,
            }
        }
    ) == {"2"}
    three = [{"term": {"title": "quick"}}, {"term": {"title": "fox"}}, {"term": {"title": "brown"}}]
    assert ids({"bool": {"should": three, "minimum_should_match": 2}}) == {"0", "1", "3"}
    assert ids({"bool": {"should": three, "minimum_should_match": "100%"}}) == {"0"}
    assert ids({"bool": {"should": three, "minimum_should_match": 4}}) == set()
    assert scores({"bool": {}}) == dict.fromkeys(ALL, 1.0)


def test_bool_scores(scores):
    quick = scores({"match": {"title": "quick"}})
    red = scores({"term": {"tag": "red"}})
    both = scores({"bool": {"must": {"match": {"title": "quick"}}, "should": {"term": {"tag": "red"}}}})
    assert both == pytest.approx({k: v + red.get(k, 0.0) for k, v in quick.items()})
    filtered = scores({"bool": {"must": {"match": {"title": "quick"}}, "filter": {"term": {"tag": "red"}}}})
    assert filtered == pytest.approx({"0": quick["0"], "1": quick["1"]})
    assert scores({"bool": {"filter": {"term": {"tag": "red"}}}}) == {"0": 0.0, "1": 0.0}
    assert scores({"bool": {"must_not": {"exists": {"field": "title"}}}}) == {"5": 0.0}
    boosted = scores({"bool": {"must": {"match": {"title": "quick"}}, "boost": 2}})
    assert boosted == pytest.approx({k: 2 * v for k, v in quick.items()})


def test_constant_score_and_dis_max(scores):
    assert scores({"constant_score": {"filter": {"match": {"title": "quick"}}, "boost": 3}}) == {
        "0": 3.0,
        "1": 3.0,
        "3": 3.0,
    }
    quick = scores({"term": {"title": "quick"}})
    fox = scores({"term": {"title": "fox"}})
    result = scores(
        {
            "dis_max": {
                "queries": [{"term": {"title": "quick"}}, {"term": {"title": "fox"}}],
                "tie_breaker": 0.3,
            }
        }
    )
    expected = {}
    for key in set(quick) | set(fox):
        a, b = quick.get(key, 0.0), fox.get(key, 0.0)
        expected[key] = max(a, b) + 0.3 * min(a, b)
    assert result == pytest.approx(expected)


def test_constant_scored_leaves(scores):
    assert scores({"range": {"n": {"gte": 10, "boost": 2}}}) == {"3": 2.0}
    assert scores({"exists": {"field": "price"}}) == {"0": 1.0, "1": 1.0, "3": 1.0}
    assert scores({"prefix": {"tag": {"value": "gr", "boost": 4}}}) == {"2": 4.0}
    assert scores({"term": {"n": 10}}) == {"3": 1.0}
    assert scores({"ids": {"values": ["5"]}}) == {"5": 1.0}


# -- query_string ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("quick AND lazy", {"1"}),
        ("quick && lazy", {"1"}),
        ("title:quick -title:fox", {"3"}),
        ("tag:red OR tag:green", {"0", "1", "2"}),
        ("tag:red || tag:green", {"0", "1", "2"}),
        ("NOT tag:red", {"2", "3", "4", "5"}),
        ("!tag:red", {"2", "3", "4", "5"}),
        ("+title:dog +tag:green", {"2"}),
        ("title:(quick OR sleeps) AND n:[2 TO 3]", {"1", "2"}),
        ("n:{2 TO 10]", {"2", "3", "5"}),
        ("n:[* TO 1]", {"0", "4"}),
        ("n:>=7", {"3", "5"}),
        ("n:<2", {"0", "4"}),
        ('"quick brown"', {"0"}),
        ('title:"brown quick"~2', {"0", "3"}),
        ("tag:r*", {"0", "1"}),
        ("tag:?reen", {"2"}),
        ("title:qu?ck", {"0", "1", "3"}),
        ("title:QUI*", {"0", "1", "3"}),
        ("_exists_:price", {"0", "1", "3"}),
        ("tag:*", {"0", "1", "2", "4"}),
        ("*", ALL),
        ("*:*", ALL),
        ("user.\\*:alice", {"0"}),
        ("user.name:alice OR user.name:bob", {"0", "1"}),
        ("title:/sl.*/", {"2"}),
        ("title:quikc~", {"0", "1", "3"}),
        ("alice", {"0"}),
        ("", set()),
        ("fox NOT (lazy OR brown)", {"4"}),
        ("tag:red AND NOT title:lazy", {"0"}),
    ],
)
def test_query_string(ids, query, expected):
    assert ids({"query_string": {"query": query}}) == expected


def test_query_string_options(ids, scores, refusal):
    assert ids({"query_string": {"query": "quick fox", "default_field": "title"}}) == {"0", "1", "3", "4"}
    assert ids(
        {"query_string": {"query": "quick fox", "default_field": "title", "default_operator": "AND"}}
    ) == {
        "0",
        "1",
    }
    assert ids(
        {"query_string": {"query": "quick OR sleeps", "default_field": "title", "default_operator": "and"}}
    ) == {"0", "1", "2", "3"}
    assert ids({"query_string": {"query": "red", "fields": ["title", "tag"]}}) == {"0", "1"}
    assert ids(
        {"query_string": {"query": "quick brown lazy", "default_field": "title", "minimum_should_match": 2}}
    ) == {"0", "1", "3"}
    plain = scores({"query_string": {"query": "title:quick"}})
    tripled = scores({"query_string": {"query": "title:quick^3"}})
    assert tripled == pytest.approx({k: 3 * v for k, v in plain.items()})
    field_boost = scores({"query_string": {"query": "quick", "fields": ["title^2"]}})
    assert field_boost == pytest.approx({k: 2 * v for k, v in plain.items()})
    assert ids({"query_string": {"query": "alice"}}, default_fields=("title",)) == set()
    error = refusal({"query_string": {"query": "abc", "fields": ["n"]}})
    assert error.reason == 'failed to create query: For input string: "abc"'
    assert ids({"query_string": {"query": "abc", "fields": ["n"], "lenient": True}}) == set()


@pytest.mark.parametrize(
    "query", ["title:(quick", "quick AND", "AND quick", "title:[1 TO", '"open', "a:b:c)"]
)
def test_query_string_syntax_errors(refusal, query):
    error = refusal({"query_string": {"query": query}})
    assert error.error_type == "query_shard_exception"
    assert error.reason == f"Failed to parse query [{query}]"
    assert error.caused_by.error_type == "parse_exception"
    assert error.caused_by.reason.startswith(f"Cannot parse '{query}'")


def test_query_string_leading_wildcard(ids, refusal):
    assert ids({"query_string": {"query": "tag:*een"}}) == {"2"}
    error = refusal({"query_string": {"query": "tag:*een", "allow_leading_wildcard": False}})
    assert error.caused_by.reason == (
        "Cannot parse 'tag:*een': '*' or '?' not allowed as first character in WildcardQuery"
    )


# -- simple_query_string --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "operator", "expected"),
    [
        ("quick + lazy", "or", {"1"}),
        ("quick | sleeps", "or", {"0", "1", "2", "3"}),
        ("fox -lazy", "or", {"0", "1", "3", "4", "5"}),  # fox OR (NOT lazy), as Lucene reads it
        ("fox -lazy", "and", {"0", "4"}),
        ('"lazy dog"', "or", {"1", "2"}),
        ('"quick fox"~1', "or", {"0", "1"}),
        ("qui*", "or", {"0", "1", "3"}),
        ("(quick | lazy) + dog", "or", {"1", "2", "3"}),
        ("quikc~1", "or", {"0", "1", "3"}),
        ("quick lazy", "and", {"1"}),
        ("", "or", set()),
        ("-", "or", set()),
    ],
)
def test_simple_query_string(ids, query, operator, expected):
    body = {"simple_query_string": {"query": query, "fields": ["title"], "default_operator": operator}}
    assert ids(body) == expected


def test_simple_query_string_fields(ids):
    assert ids({"simple_query_string": {"query": "red", "fields": ["tag", "title"]}}) == {"0", "1"}
    assert ids({"simple_query_string": {"query": "alice"}}) == {"0"}
    assert ids(
        {
            "simple_query_string": {
                "query": "quick fox lazy",
                "fields": ["title"],
                "minimum_should_match": "100%",
            }
        }
    ) == {"1"}


# -- shards of several segments with deletions ----------------------------------------------


def test_deleted_documents_are_left_to_the_caller(tmp_path):
    mapping = Mapping.from_body(MAPPING)
    searcher = build_shard(tmp_path, mapping, [DOCS[:3], DOCS[3:]], deleted=frozenset({"1", "4"}))
    assert set(run(searcher, mapping, {"match": {"title": "fox"}})) == {"0"}
    ctx = QueryContext(mapping, searcher, now_millis=NOW)
    mask, _ = execute(prepare(parse_query({"match": {"title": "fox"}}), ctx), searcher.views[0], ctx)
    assert mask.tolist() == [True, True, False]  # execute itself does not hide deleted documents


def test_segments_without_the_field(tmp_path):
    mapping = Mapping.from_body(MAPPING)
    searcher = build_shard(tmp_path, mapping, [[{"n": 1}], DOCS[:2]])
    assert set(run(searcher, mapping, {"match_phrase": {"title": "quick brown"}})) == {"1"}
    assert set(
        run(searcher, mapping, {"bool": {"should": [{"term": {"tag": "red"}}, {"match": {"title": "fox"}}]}})
    ) == {"1", "2"}


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        ({"gte": 0, "lte": 100}, {"0", "1", "3", "4", "6"}),  # covers both segments: valued docs only
        ({"gte": 50}, set()),  # misses both
        ({"gte": 11}, {"3", "4", "6"}),  # covers the second segment, misses the first
        ({"gt": 2, "lt": 12}, {"1", "3"}),  # cuts through both
        ({"lte": 1}, {"0"}),
    ],
)
def test_a_range_decided_by_segment_bounds_matches_what_a_pass_over_the_documents_would(
    tmp_path: Path, bounds: dict, expected: set[str]
) -> None:
    """A segment whose values all fall inside a range matches its documents that have a value
    (not the ones without); one whose values all fall outside matches none; multi-valued
    documents match when any value is inside."""
    mapping = Mapping.from_body({"properties": {"n": {"type": "long"}}})
    segments = [[{"n": 1}, {"n": 3}, {}], [{"n": [11, 30]}, {"n": 12}, {}, {"n": 20}]]
    searcher = build_shard(tmp_path, mapping, segments)
    assert set(run(searcher, mapping, {"range": {"n": bounds}}, needs_scores=False)) == expected
