"""Relevance scores equal BM25 as Elasticsearch 8 computes it (Lucene 9: k1 = 1.2, b = 0.75, no
(k1 + 1) factor), written out here independently with Python floats, with shard-level statistics:
summed over segments and counting deleted documents."""

from __future__ import annotations

import math

import pytest
from test_matching import build_shard, run

from leafsearch.index.mapping import Mapping
from leafsearch.search import bm25

K1, B = 1.2, 0.75

MAPPING = {"properties": {"body": {"type": "text"}, "tag": {"type": "keyword"}, "flag": {"type": "boolean"}}}

# Field lengths stay under 24 tokens, where Lucene's one-byte norm stores the length exactly.
CORPUS = [
    {"body": "the quick brown fox jumps over the lazy dog", "tag": "a", "flag": True},
    {"body": "quick quick quick", "tag": ["a", "b"], "flag": False},
    {"body": "a fox", "tag": "b", "flag": True},
    {"body": "lazy dogs and lazy cats sleep all day long in the sun", "tag": "c"},
    {"body": "fox fox brown", "tag": "a", "flag": True},
    {"body": "nothing to see here"},
    {"tag": "d"},
]


def tokens(doc: dict) -> list[str]:
    return doc["body"].lower().split() if "body" in doc else []


def idf(n: int, docs: int) -> float:
    return math.log(1 + (docs - n + 0.5) / (n + 0.5))


def term_score(term: str, doc: dict, corpus: list[dict], boost: float = 1.0) -> float:
    """score = boost * idf * tf / (tf + k1 * (1 - b + b * dl / avgdl)) over the whole corpus."""
    with_field = [tokens(d) for d in corpus if tokens(d)]
    avgdl = sum(len(t) for t in with_field) / len(with_field)
    df = sum(1 for t in with_field if term in t)
    words = tokens(doc)
    tf = words.count(term)
    if tf == 0:
        return 0.0
    return boost * idf(df, len(with_field)) * tf / (tf + K1 * (1 - B + B * len(words) / avgdl))


def match_scores(query: str, corpus: list[dict], live: list[int] | None = None) -> dict[str, float]:
    """A `match` of several words: the sum of the term scores, for the live documents that match."""
    out = {}
    for i, doc in enumerate(corpus):
        if live is not None and i not in live:
            continue
        total = sum(term_score(t, doc, corpus) for t in query.split())
        if any(t in tokens(doc) for t in query.split()):
            out[str(i)] = total
    return out


def ranking(scores: dict[str, float]) -> list[str]:
    return [k for k, _ in sorted(scores.items(), key=lambda kv: (-kv[1], int(kv[0])))]


def assert_scores(actual: dict[str, float], expected: dict[str, float]) -> None:
    assert set(actual) == set(expected)
    for key, value in expected.items():
        assert actual[key] == pytest.approx(value, abs=1e-5), key
    assert ranking(actual) == ranking(expected)


@pytest.fixture(scope="module")
def mapping():
    return Mapping.from_body(MAPPING)


@pytest.fixture(scope="module")
def one_segment(tmp_path_factory, mapping):
    return build_shard(tmp_path_factory.mktemp("one"), mapping, [CORPUS])


@pytest.fixture(scope="module")
def three_segments(tmp_path_factory, mapping):
    return build_shard(tmp_path_factory.mktemp("three"), mapping, [CORPUS[:2], CORPUS[2:5], CORPUS[5:]])


def test_single_document_score_is_elasticsearch_s(tmp_path, mapping):
    searcher = build_shard(tmp_path, mapping, [[{"body": "foo"}]])
    assert run(searcher, mapping, {"match": {"body": "foo"}}) == {"0": pytest.approx(0.13076457, abs=1e-7)}


@pytest.mark.parametrize("query", ["fox", "quick", "lazy", "quick fox", "the lazy brown dog", "fox fox"])
def test_match_scores(one_segment, mapping, query):
    assert_scores(run(one_segment, mapping, {"match": {"body": query}}), match_scores(query, CORPUS))


@pytest.mark.parametrize("query", ["fox", "quick brown", "lazy sun dog"])
def test_statistics_are_summed_over_segments(three_segments, one_segment, mapping, query):
    actual = run(three_segments, mapping, {"match": {"body": query}})
    assert_scores(actual, match_scores(query, CORPUS))
    assert actual == run(one_segment, mapping, {"match": {"body": query}})


def test_deleted_documents_still_count_in_statistics(tmp_path, mapping):
    searcher = build_shard(tmp_path, mapping, [CORPUS[:3], CORPUS[3:]], deleted=frozenset({"0", "4"}))
    live = [1, 2, 3, 5, 6]
    assert_scores(
        run(searcher, mapping, {"match": {"body": "fox brown"}}), match_scores("fox brown", CORPUS, live)
    )


def test_boost_and_operator(one_segment, mapping):
    expected = {k: 2.5 * v for k, v in match_scores("quick fox", CORPUS).items()}
    assert_scores(
        run(one_segment, mapping, {"match": {"body": {"query": "quick fox", "boost": 2.5}}}), expected
    )
    both = {k: v for k, v in match_scores("quick fox", CORPUS).items() if k == "0"}
    assert_scores(
        run(one_segment, mapping, {"match": {"body": {"query": "quick fox", "operator": "and"}}}), both
    )


def test_term_on_text_scores_like_a_one_word_match(one_segment, mapping):
    assert_scores(run(one_segment, mapping, {"term": {"body": "lazy"}}), match_scores("lazy", CORPUS))


def test_keyword_term_scores_without_norms_or_frequencies(one_segment, mapping):
    # Keywords: frequency 1, field length 1, average length = values per document with the field.
    docs_with_tag = [d for d in CORPUS if "tag" in d]
    values = sum(len(d["tag"]) if isinstance(d["tag"], list) else 1 for d in docs_with_tag)
    avgdl = values / len(docs_with_tag)
    df = sum(1 for d in docs_with_tag if "a" in (d["tag"] if isinstance(d["tag"], list) else [d["tag"]]))
    expected_score = idf(df, len(docs_with_tag)) / (1 + K1 * (1 - B + B * 1 / avgdl))
    expected = {"0": expected_score, "1": expected_score, "4": expected_score}
    assert_scores(run(one_segment, mapping, {"term": {"tag": "a"}}), expected)


def test_boolean_term_scores_like_a_keyword(one_segment, mapping):
    docs_with_flag = [d for d in CORPUS if "flag" in d]
    df = sum(1 for d in docs_with_flag if d["flag"])
    expected_score = idf(df, len(docs_with_flag)) / (1 + K1)  # one value per document: avgdl = 1
    assert_scores(
        run(one_segment, mapping, {"term": {"flag": True}}), dict.fromkeys(["0", "2", "4"], expected_score)
    )


def test_phrase_scores_use_the_phrase_frequency_and_summed_idf(one_segment, mapping):
    with_field = [tokens(d) for d in CORPUS if tokens(d)]
    avgdl = sum(len(t) for t in with_field) / len(with_field)
    weight = sum(idf(sum(1 for t in with_field if w in t), len(with_field)) for w in ("brown", "fox"))
    expected = {}
    for i, doc in enumerate(CORPUS):
        words = tokens(doc)
        freq = sum(1 for j in range(len(words) - 1) if words[j : j + 2] == ["brown", "fox"])
        if freq:
            expected[str(i)] = weight * freq / (freq + K1 * (1 - B + B * len(words) / avgdl))
    assert set(expected) == {"0"}
    assert_scores(run(one_segment, mapping, {"match_phrase": {"body": "brown fox"}}), expected)


def test_filter_context_and_constant_scores(one_segment, mapping):
    assert run(one_segment, mapping, {"bool": {"filter": {"match": {"body": "fox"}}}}) == {
        "0": 0.0,
        "2": 0.0,
        "4": 0.0,
    }
    assert run(one_segment, mapping, {"constant_score": {"filter": {"match": {"body": "fox"}}}}) == {
        "0": 1.0,
        "2": 1.0,
        "4": 1.0,
    }
    scored = run(
        one_segment, mapping, {"bool": {"must": {"match": {"body": "fox"}}, "filter": {"term": {"tag": "a"}}}}
    )
    expected = {k: v for k, v in match_scores("fox", CORPUS).items() if k in ("0", "4")}
    assert_scores(scored, expected)


def test_bool_sums_must_and_should(one_segment, mapping):
    body = {
        "bool": {
            "must": {"match": {"body": "fox"}},
            "should": [{"match": {"body": "brown"}}, {"match": {"body": "lazy"}}],
        }
    }
    fox = match_scores("fox", CORPUS)
    expected = {
        k: v + term_score("brown", CORPUS[int(k)], CORPUS) + term_score("lazy", CORPUS[int(k)], CORPUS)
        for k, v in fox.items()
    }
    assert_scores(run(one_segment, mapping, body), expected)


def test_float32_steps_follow_lucene():
    # The cache entry for a length of 9 with avgdl 4.5: 1 / (1.2 * (0.25 + 0.75 * 9 / 4.5)).
    table = bm25.norm_table(bm25.avg_field_length(9, 2))
    assert float(table[9]) == pytest.approx(1 / (1.2 * (0.25 + 1.5)), rel=1e-7)
    assert table.dtype.name == "float32"
    assert float(bm25.idf(1, 1)) == pytest.approx(0.2876821, abs=1e-7)
    assert float(bm25.idf_sum([1, 1], 1)) == pytest.approx(2 * 0.2876821, abs=1e-6)
