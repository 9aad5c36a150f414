"""An index's analyzers: the built-in ones Elasticsearch has (as far as leafsearch has their parts)
and those its `index.analysis.*` settings define, as `Analyzer`s the mapping, the queries,
`_analyze` and highlighting share.

An `Analyzer` is a tokenizer and token filters (tokenizers.py, token_filters.py). The `standard`
analyzer keeps analysis.py's batch-fast path; any other runs its chain token by token. Built from
the settings once per distinct analysis (`analysis_of` is memoised), so every mapping of an index,
the server's and each search worker's, holds the same objects.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from leafsearch.common.memo import memo
from leafsearch.common.settings import index_setting
from leafsearch.errors import IllegalArgument
from leafsearch.index import analysis, stopwords, token_filters, tokenizers
from leafsearch.index.parsed import POSITION_INCREMENT_GAP
from leafsearch.index.token_filters import TokenFilter
from leafsearch.index.tokenizers import AnalysisConfigError, Tok, Tokenizer
from leafsearch.unsupported import NotSupported

_PREFIX = "index.analysis."
#: Filters a normalizer (a keyword's analysis, no tokenizer) may use: those working per character.
NORMALIZER_FILTERS = frozenset({"lowercase", "uppercase", "asciifolding", "elision", "trim"})
_WHY = "leafsearch has no char filters and not every analysis component Elasticsearch has"

# Names Elasticsearch's analysis modules register, so that leafsearch can say which it lacks.
# fmt: off
ES_ANALYZERS = frozenset({
    "simple", "whitespace", "stop", "pattern", "fingerprint", "snowball", "classic", "arabic",
    "armenian", "basque", "bengali", "brazilian", "bulgarian", "catalan", "cjk", "czech", "danish",
    "dutch", "english", "estonian", "finnish", "french", "galician", "german", "greek", "hindi",
    "hungarian", "indonesian", "irish", "italian", "latvian", "lithuanian", "norwegian", "persian",
    "portuguese", "romanian", "russian", "serbian", "sorani", "spanish", "swedish", "turkish", "thai",
})
ES_TOKENIZERS = frozenset({
    "char_group", "classic", "edge_ngram", "letter", "lowercase", "ngram", "path_hierarchy",
    "pattern", "simple_pattern", "simple_pattern_split", "thai", "uax_url_email", "whitespace",
    "edgeNGram", "nGram", "PathHierarchy",
})
ES_FILTERS = frozenset({
    "apostrophe", "asciifolding", "cjk_bigram", "cjk_width", "classic", "common_grams", "conditional",
    "decimal_digit", "delimited_payload", "dictionary_decompounder", "edge_ngram", "elision",
    "fingerprint", "flatten_graph", "hunspell", "hyphenation_decompounder", "keep_types", "keep",
    "keyword_marker", "keyword_repeat", "kstem", "length", "limit", "min_hash", "multiplexer",
    "ngram", "pattern_capture", "pattern_replace", "porter_stem", "predicate_token_filter",
    "remove_duplicates", "reverse", "shingle", "snowball", "stemmer", "stemmer_override", "stop",
    "synonym", "synonym_graph", "trim", "truncate", "unique", "uppercase", "word_delimiter",
    "word_delimiter_graph", "arabic_normalization", "german_normalization", "hindi_normalization",
    "indic_normalization", "persian_normalization", "scandinavian_normalization",
    "serbian_normalization", "sorani_normalization", "bengali_normalization", "russian_stem",
    "porterStem", "nGram", "edgeNGram", "standard",
})
ES_CHAR_FILTERS = frozenset({"html_strip", "mapping", "pattern_replace"})
# fmt: on


class Analyzer:
    """A named chain: `tokens` gives the stream with offsets and types, `terms` the indexed terms,
    `positions` the terms and positions of a (multi-valued) field."""

    __slots__ = (
        "name",
        "tokenizer_name",
        "tokenizer",
        "filter_names",
        "filters",
        "position_gap",
        "standard",
        "custom",
        "origin",
        "_steps",
    )

    def __init__(
        self,
        name: str,
        tokenizer_name: str,
        tokenizer: Tokenizer,
        filters: list[tuple[str, TokenFilter]],
        position_gap: int = POSITION_INCREMENT_GAP,
        standard: bool = False,
        custom: bool = False,
    ) -> None:
        self.name = name
        self.tokenizer_name, self.tokenizer = tokenizer_name, tokenizer
        self.filter_names = tuple(n for n, _ in filters)
        self.filters = tuple(f for _, f in filters)
        self.position_gap = position_gap
        #: The `standard` analyzer: analysis.py's fast functions give its terms.
        self.standard = standard
        #: Defined as `custom` (`_analyze` explains it stage by stage).
        self.custom = custom
        #: (the analysis's key, the analyzer's name): how another process finds it again.
        self.origin: tuple | None = None
        self._steps = _term_steps(tokenizer_name, tokenizer, self.filters)

    def __repr__(self) -> str:
        return f"Analyzer({self.name!r})"

    def __reduce__(self) -> tuple:
        """Pickled as where it comes from (mappings' field types cross the shard interface): the
        other process builds the same analysis from the same settings, or has it memoised."""
        if self.origin is None:
            raise TypeError(f"analyzer [{self.name}] of a request cannot cross processes")
        return (_rebuilt, self.origin)

    def tokens(self, text: str, upto: int | None = None) -> list[Tok]:
        """The token stream after the tokenizer and the first `upto` filters (all by default)."""
        toks = self.tokenizer(text)
        for f in self.filters[:upto]:
            toks = f(toks)
        return toks

    def terms(self, text: str) -> list[str]:
        if self.standard:
            return analysis.analyze(text)
        if self._steps is not None:
            return self._on_terms(text)[0]
        return [t.term for t in self.tokens(text)]

    def _on_terms(self, text: str) -> tuple[list[str], list[int]]:
        """Terms and positions through the filters' term forms (`_term_steps`)."""
        terms = analysis.analyze(text)
        positions = list(range(len(terms)))
        for step in self._steps or ():
            terms, positions = step(terms, positions)
        return terms, positions

    def positions(self, values: list[str], gap: int) -> tuple[list[str], list[int]]:
        """Terms and positions of a field's values, each value `gap` positions after the last."""
        if self.standard:
            return analysis.analyze_with_positions(values, gap)
        terms: list[str] = []
        positions: list[int] = []
        position = -1
        for i, value in enumerate(values):
            if i:
                position += gap
            if self._steps is not None:
                value_terms, value_positions = self._on_terms(value)
                terms += value_terms
                positions += [position + 1 + p for p in value_positions]
                position += (value_positions[-1] + 1) if value_positions else 0
                continue
            for t in self.tokens(value):
                position += t.inc
                terms.append(t.term)
                positions.append(max(position, 0))
        return terms, positions


def _term_steps(tokenizer_name: str, tokenizer: Tokenizer, filters: tuple[TokenFilter, ...]) -> list | None:
    """The filters' term forms when the chain may index without `Tok`s: the default standard
    tokenizer (analysis.py's `analyze`, which lowercases), `lowercase` in the chain with only
    case-blind filters before it, and every filter with a term form; else None."""
    if (
        tokenizer_name != "standard"
        or getattr(tokenizer, "max_token_length", None) != analysis.MAX_TOKEN_LENGTH
    ):
        return None
    steps = [getattr(f, "terms", None) for f in filters]
    if None in steps:
        return None
    for f in filters:
        if getattr(f, "lowercases", False):
            return steps
        if not getattr(f, "case_blind", False):
            return None
    return None


def _standard_lowercase() -> list[tuple[str, TokenFilter]]:
    return [("lowercase", token_filters.lowercase({}, "lowercase"))]


STANDARD = Analyzer(
    "standard", "standard", tokenizers.standard({}, "standard"), _standard_lowercase(), standard=True
)
STANDARD.origin = (((), 1, 3), "standard")


def _stop(words: frozenset[str]) -> tuple[str, TokenFilter]:
    return "stop", token_filters.stop({"stopwords": sorted(words)}, "stop")


def _marker(params: Mapping[str, Any], name: str) -> list[tuple[str, TokenFilter]]:
    if "stem_exclusion" not in params:
        return []
    words = token_filters.word_set(dict(params), "stem_exclusion", frozenset(), name)
    return [("keyword_marker", token_filters.keyword_marker({"keywords": sorted(words)}, name))]


def _language(
    language: str, stemmer: str, before: tuple[str, ...] = ("lowercase",)
) -> Callable[[Mapping[str, Any], str], Analyzer]:
    """Elasticsearch's `<language>` analyzer: the standard tokenizer, the language's stop words and
    its Snowball stemmer (the English one: possessive, Porter)."""

    def build(params: Mapping[str, Any], name: str) -> Analyzer:
        words = token_filters.word_set(dict(params), "stopwords", stopwords.NAMED[f"_{language}_"], name)
        chain: list[tuple[str, TokenFilter]] = []
        for step in before:
            if step == "possessive":
                chain.append(("english_possessive", token_filters.possessive_english))
            elif step == "elision":
                chain.append(("elision", token_filters.elision({"articles_case": True}, name)))
            else:
                chain.append((step, token_filters.lowercase({}, step)))
        chain += [_stop(words), *_marker(params, name), (f"{language}_stem", token_filters.stemming(stemmer))]
        return Analyzer(name, "standard", tokenizers.standard({}, name), chain)

    return build


def _standard_type(params: Mapping[str, Any], name: str) -> Analyzer:
    if not params.get("stopwords") and "max_token_length" not in params:
        return Analyzer(name, "standard", STANDARD.tokenizer, _standard_lowercase(), standard=True)
    words = token_filters.word_set(dict(params), "stopwords", frozenset(), name)
    chain = [*_standard_lowercase(), _stop(words)] if words else _standard_lowercase()
    return Analyzer(name, "standard", tokenizers.standard(dict(params), name), chain)


def _simple(params: Mapping[str, Any], name: str) -> Analyzer:
    return Analyzer(name, "lowercase", tokenizers.lowercase({}, name), [])


def _whitespace(params: Mapping[str, Any], name: str) -> Analyzer:
    return Analyzer(name, "whitespace", tokenizers.whitespace(dict(params), name), [])


def _keyword(params: Mapping[str, Any], name: str) -> Analyzer:
    return Analyzer(name, "keyword", tokenizers.keyword({}, name), [])


def _stop_type(params: Mapping[str, Any], name: str) -> Analyzer:
    words = token_filters.word_set(dict(params), "stopwords", stopwords.ENGLISH, name)
    return Analyzer(name, "lowercase", tokenizers.lowercase({}, name), [_stop(words)])


def _pattern_type(params: Mapping[str, Any], name: str) -> Analyzer:
    chain: list[tuple[str, TokenFilter]] = []
    if tokenizers.flag_param(dict(params), "lowercase", True):
        chain.append(("lowercase", token_filters.lowercase({}, name)))
    words = token_filters.word_set(dict(params), "stopwords", frozenset(), name)
    if words:
        chain.append(_stop(words))
    return Analyzer(name, "pattern", tokenizers.pattern(dict(params), name), chain)


def _snowball_type(params: Mapping[str, Any], name: str) -> Analyzer:
    words = token_filters.word_set(dict(params), "stopwords", stopwords.ENGLISH, name)
    chain = [*_standard_lowercase(), _stop(words), ("snowball", token_filters.snowball(dict(params), name))]
    return Analyzer(name, "standard", tokenizers.standard({}, name), chain)


#: Analyzer types (and the built-in analyzers of the same names, with no settings).
ANALYZER_TYPES: dict[str, Callable[[Mapping[str, Any], str], Analyzer]] = {
    "standard": _standard_type,
    "simple": _simple,
    "whitespace": _whitespace,
    "keyword": _keyword,
    "stop": _stop_type,
    "pattern": _pattern_type,
    "snowball": _snowball_type,
    "english": _language("english", "porter", ("possessive", "lowercase")),
    "french": _language("french", "french", ("elision", "lowercase")),
    "german": _language("german", "german"),
    "spanish": _language("spanish", "spanish"),
}


class IndexAnalysis:
    """The analysis of one index: its analyzers by name (built-in and custom), the default ones,
    and the named tokenizers and filters its settings define (for `_analyze`)."""

    def __init__(self, flat: Mapping[str, Any], max_ngram_diff: int = 1, max_shingle_diff: int = 3) -> None:
        self.max_ngram_diff, self.max_shingle_diff = max_ngram_diff, max_shingle_diff
        self.key = (_items(flat), max_ngram_diff, max_shingle_diff)
        groups: dict[str, dict[str, dict[str, Any]]] = {
            k: {} for k in ("analyzer", "tokenizer", "filter", "char_filter", "normalizer")
        }
        for key, value in flat.items():
            if not key.startswith(_PREFIX):
                continue
            kind, _, rest = key[len(_PREFIX) :].partition(".")
            name, _, param = rest.rpartition(".")
            if kind not in groups or not name:
                raise IllegalArgument(
                    f"unknown setting [{key}] please check that any required plugins are installed"
                )
            groups[kind].setdefault(name, {})[param] = value
        self._specs = groups
        for name in groups["char_filter"]:
            raise NotSupported(f"the char_filter [{name}]", _WHY)
        self._tokenizers = {n: self._build_tokenizer(spec, n) for n, spec in groups["tokenizer"].items()}
        self._analyzers: dict[str, Analyzer] = {}
        self._normalizers: dict[str, Analyzer] = {}
        for name, spec in groups["normalizer"].items():
            built = self._normalizers[name] = self._build_normalizer(spec, name)
            built.origin = (self.key, name, True)
        for name, spec in groups["analyzer"].items():
            built = self._analyzers[name] = self._build_analyzer(spec, name)
            built.origin = (self.key, name)
        self.default = self._analyzers.get("default", STANDARD)
        self.default_search = self._analyzers.get("default_search", self.default)

    # -- lookups -------------------------------------------------------------------------------

    def analyzer(self, name: str) -> Analyzer | None:
        """An analyzer by the name a mapping or a query gives: the index's own, then the built-in."""
        found = self._analyzers.get(name)
        if found is not None:
            return found
        if name == "default":
            return self.default
        return _builtin(name)

    def normalizer(self, name: str) -> Analyzer | None:
        """A keyword normalizer the index defines (`lowercase` is the mapping's own)."""
        return self._normalizers.get(name)

    def _build_normalizer(self, spec: dict[str, Any], name: str) -> Analyzer:
        """A custom normalizer: the keyword tokenizer and filters that work per character."""
        if spec.get("type", "custom") != "custom":
            raise IllegalArgument(f"Unknown normalizer type [{spec.get('type')}] for [{name}]")
        if spec.get("char_filter"):
            raise NotSupported(f"the char_filter of Custom normalizer [{name}]", _WHY)
        keyword = tokenizers.keyword({}, name)
        chain: list[tuple[str, TokenFilter]] = []
        for filter_spec in _as_list(spec.get("filter")):
            made = self.token_filter(filter_spec, name, (keyword, [f for _, f in chain]))
            if made is None:
                raise IllegalArgument(
                    f"Custom normalizer [{name}] failed to find filter under name [{filter_spec}]"
                )
            if made[0] not in NORMALIZER_FILTERS:
                raise IllegalArgument(f"Custom normalizer [{name}] may not use filter [{made[0]}]")
            chain.append(made)
        return Analyzer(name, "keyword", keyword, chain, 0, custom=True)

    def tokenizer(self, spec: Any, owner: str) -> tuple[str, Tokenizer] | None:
        """A tokenizer named (the index's, then the built-in) or given inline as `{"type": ...}`."""
        if isinstance(spec, Mapping):
            return str(spec.get("type")), self._build_tokenizer(dict(spec), owner)
        found = self._tokenizers.get(spec)
        if found is not None:
            return spec, found
        if spec in tokenizers.TOKENIZERS or spec in tokenizers.NGRAM_TOKENIZERS:
            return spec, self._build_tokenizer({"type": spec}, spec)
        return None

    def token_filter(
        self, spec: Any, owner: str, before: tuple[Tokenizer, list[TokenFilter]]
    ) -> tuple[str, TokenFilter] | None:
        """A filter named or inline; `before` is the chain ahead of it (synonym rules go through it)."""
        if isinstance(spec, Mapping):
            return str(spec.get("type")), self._build_filter(dict(spec), owner, before)
        defined = self._specs["filter"].get(spec)
        if defined is not None:
            return spec, self._build_filter(defined, spec, before)
        if (
            spec in token_filters.FILTERS
            or spec in token_filters.NGRAM_FILTERS | token_filters.SHINGLE_FILTERS
        ):
            return spec, self._build_filter({"type": spec}, spec, before)
        if spec in token_filters.SYNONYM_FILTERS:
            return spec, self._build_filter({"type": spec}, spec, before)
        if spec in ("english_possessive", "possessive_english"):
            return spec, token_filters.possessive_english
        return None

    # -- building ------------------------------------------------------------------------------

    def _build_tokenizer(self, spec: dict[str, Any], name: str) -> Tokenizer:
        type_ = spec.get("type")
        params = {k: v for k, v in spec.items() if k != "type"}
        try:
            if type_ in tokenizers.TOKENIZERS:
                return tokenizers.TOKENIZERS[type_](params, name)
            if type_ in tokenizers.NGRAM_TOKENIZERS:
                return tokenizers.NGRAM_TOKENIZERS[type_](params, name, self.max_ngram_diff)
        except AnalysisConfigError as e:
            raise IllegalArgument(str(e)) from None
        if type_ is None:
            raise IllegalArgument(f"tokenizer [{name}] must specify either an analyzer type, or a tokenizer")
        if type_ in ES_TOKENIZERS:
            raise NotSupported(f"the [{type_}] tokenizer", _WHY)
        raise IllegalArgument(f"Unknown tokenizer type [{type_}] for [{name}]")

    def _build_filter(
        self, spec: dict[str, Any], name: str, before: tuple[Tokenizer, list[TokenFilter]]
    ) -> TokenFilter:
        type_ = spec.get("type")
        params = {k: v for k, v in spec.items() if k != "type"}
        try:
            if type_ in token_filters.FILTERS:
                return token_filters.FILTERS[type_](params, name)
            if type_ in token_filters.NGRAM_FILTERS:
                edge = type_ in ("edge_ngram", "edgeNGram")
                return token_filters.ngram(params, name, self.max_ngram_diff, edge)
            if type_ in token_filters.SHINGLE_FILTERS:
                return token_filters.shingle(params, name, self.max_shingle_diff)
            if type_ in token_filters.SYNONYM_FILTERS:
                tokenizer, chain = before

                def analyze(text: str) -> list[str]:
                    toks = tokenizer(text)
                    for f in chain:
                        toks = f(toks)
                    return [t.term for t in toks]

                return token_filters.synonym_filter(token_filters.parse_synonyms(params, name, analyze))
        except AnalysisConfigError as e:
            raise IllegalArgument(str(e)) from None
        if type_ is None:
            raise IllegalArgument(f"token filter [{name}] must specify type")
        if type_ in ES_FILTERS:
            raise NotSupported(f"the [{type_}] filter", _WHY)
        raise IllegalArgument(f"Unknown filter type [{type_}] for [{name}]")

    def _build_analyzer(self, spec: dict[str, Any], name: str) -> Analyzer:
        type_ = spec.get("type")
        gap = _gap(spec, name)
        if type_ == "custom" or (type_ is None and "tokenizer" in spec):
            return self.custom(
                name, spec.get("tokenizer"), _as_list(spec.get("filter")), spec.get("char_filter"), gap
            )
        if type_ is None:
            raise IllegalArgument(f"analyzer [{name}] must specify either an analyzer type, or a tokenizer")
        build = ANALYZER_TYPES.get(type_)
        if build is None:
            if type_ in ES_ANALYZERS:
                raise NotSupported(f"the [{type_}] analyzer", _WHY)
            raise IllegalArgument(f"Unknown analyzer type [{type_}] for [{name}]")
        try:
            built = build({k: v for k, v in spec.items() if k != "type"}, name)
        except AnalysisConfigError as e:
            raise IllegalArgument(str(e)) from None
        built.position_gap = gap
        return built

    def custom(self, name: str, tokenizer: Any, filters: list[Any], char_filters: Any, gap: int) -> Analyzer:
        if tokenizer is None:
            raise IllegalArgument(f"Custom Analyzer [{name}] must be configured with a tokenizer")
        if char_filters:
            raise NotSupported(f"the char_filter of Custom Analyzer [{name}]", _WHY)
        found = self.tokenizer(tokenizer, name)
        if found is None:
            raise IllegalArgument(
                f"Custom Analyzer [{name}] failed to find tokenizer under name [{tokenizer}]"
            )
        chain: list[tuple[str, TokenFilter]] = []
        for spec in filters:
            made = self.token_filter(spec, name, (found[1], [f for _, f in chain]))
            if made is None:
                raise IllegalArgument(f"Custom Analyzer [{name}] failed to find filter under name [{spec}]")
            chain.append(made)
        return Analyzer(name, found[0], found[1], chain, gap, custom=True)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return value if isinstance(value, list) else [v.strip() for v in str(value).split(",") if v.strip()]


def _gap(spec: Mapping[str, Any], name: str) -> int:
    value = spec.get("position_increment_gap", POSITION_INCREMENT_GAP)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise IllegalArgument(
            f"Failed to parse value [{value}] for setting [position_increment_gap]"
        ) from None


@memo(64)
def _builtin(name: str) -> Analyzer | None:
    if name == "standard":
        return STANDARD
    build = ANALYZER_TYPES.get(name)
    if build is None:
        return None
    built = build({}, name)
    built.origin = (((), 1, 3), name)
    return built


def _rebuilt(key: tuple, name: str, normalizer: bool = False) -> Analyzer:
    analysis = _analysis_of(*key)
    found = analysis.normalizer(name) if normalizer else analysis.analyzer(name)
    assert found is not None, name
    return found


def _items(flat: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The analysis settings as a hashable key: sorted, lists as tuples."""
    return tuple(
        sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in flat.items() if k.startswith(_PREFIX))
    )


@memo(256, max_key_chars=1 << 20)
def _analysis_of(
    items: tuple[tuple[str, Any], ...], max_ngram_diff: int, max_shingle_diff: int
) -> IndexAnalysis:
    return IndexAnalysis(
        {k: list(v) if isinstance(v, tuple) else v for k, v in items}, max_ngram_diff, max_shingle_diff
    )


def analysis_of(settings: Mapping[str, Any]) -> IndexAnalysis:
    """The analysis an index's (flat) settings define; 400 `illegal_argument_exception` if wrong."""
    return _analysis_of(
        _items(settings),
        index_setting(settings, "index.max_ngram_diff"),
        index_setting(settings, "index.max_shingle_diff"),
    )


DEFAULT_ANALYSIS = IndexAnalysis({})
