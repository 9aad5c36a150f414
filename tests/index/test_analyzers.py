"""Analyzers as the engine holds them: built once per distinct analysis, crossing processes as
where they come from, and the term-list path giving what the token path gives."""

from __future__ import annotations

import pickle

from leafsearch.index.analyzers import STANDARD, analysis_of
from leafsearch.index.mapping import Mapping

SETTINGS = {
    "index.analysis.analyzer.folding.type": "custom",
    "index.analysis.analyzer.folding.tokenizer": "standard",
    "index.analysis.analyzer.folding.filter": ["lowercase", "asciifolding", "stop", "porter_stem"],
    "index.analysis.analyzer.paths.tokenizer": "path_hierarchy",
}


def test_analysis_is_built_once_per_distinct_settings() -> None:
    assert analysis_of(dict(SETTINGS)) is analysis_of(dict(SETTINGS))
    assert analysis_of({}).analyzer("standard") is STANDARD


def test_field_types_pickle_with_their_analyzers() -> None:
    analysis = analysis_of(SETTINGS)
    mapping = Mapping.from_body(
        {
            "properties": {
                "a": {"type": "text", "analyzer": "folding"},
                "b": {"type": "text", "analyzer": "english"},
            }
        },
        analysis,
    )
    for name, text, terms in (
        ("a", "Crème brûlée running", ["creme", "brule", "run"]),
        ("b", "The dogs", ["dog"]),
    ):
        field = pickle.loads(pickle.dumps(mapping.field(name)))
        assert field.analyzer.terms(text) == terms
    assert pickle.loads(pickle.dumps(analysis.analyzer("paths"))) is analysis.analyzer("paths")


def test_term_lists_give_the_token_path_terms_and_positions() -> None:
    analysis = analysis_of(SETTINGS)
    texts = ["The Dogs' running café", "a an the", "", "x" * 300 + " it is Done's", "Ünïcödé and 3.14 U.S.A"]
    for name in ("folding", "english", "french", "german", "spanish"):
        analyzer = analysis.analyzer(name)
        assert analyzer is not None and analyzer._steps is not None, name
        for values in ([t] for t in texts):
            fast = analyzer.positions([*values, *values], 100)
            tokens = [analyzer.tokens(v) for v in values * 2]
            terms = [t.term for toks in tokens for t in toks]
            assert fast[0] == terms, (name, values)
