"""`_analyze`: the tokens leafsearch makes of a text, as Elasticsearch's analyze API shows them.

The analysis is the index's (index/analyzers.py: its custom analyzers, tokenizers and filters, and
the built-in ones), or the built-in analysis without an index; a field's analyzer comes from the
mapping. Components Elasticsearch has and leafsearch lacks (char filters, some filters) are
refused as not supported by leafsearch; names Elasticsearch does not know get its own "failed to
find" errors.

Offsets are UTF-16 code units as Lucene counts them; positions and offsets continue across the
values of a `text` array with Elasticsearch's gaps (one offset, and the analyzer's position gap:
0 for a global analyzer or a custom chain, 100 for an index's analyzers, the mapping's
`position_increment_gap` for a field).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from leafsearch.common.json_tokens import token_name
from leafsearch.common.settings import index_setting
from leafsearch.errors import ActionRequestValidation, ElasticError, IllegalArgument, XContentParseError
from leafsearch.index.analyzers import (
    DEFAULT_ANALYSIS,
    ES_ANALYZERS,
    ES_CHAR_FILTERS,
    ES_FILTERS,
    ES_TOKENIZERS,
    NORMALIZER_FILTERS,
    Analyzer,
    IndexAnalysis,
)
from leafsearch.index.parsed import POSITION_INCREMENT_GAP
from leafsearch.index.tokenizers import Tok, keyword
from leafsearch.unsupported import NotSupported

if TYPE_CHECKING:
    from leafsearch.index.index import Index

MAX_TOKEN_COUNT = 10_000  # `index.analyze.max_token_count`'s default, the limit without an index
_FIELDS = frozenset(
    {"text", "analyzer", "tokenizer", "filter", "char_filter", "normalizer", "field", "explain", "attributes"}
)

_WHY = "leafsearch has no char filters and not every token filter Elasticsearch has"


@dataclass(frozen=True, slots=True)
class Chain:
    """What analyses the text, named as `explain` names it."""

    name: str
    analyzer: Analyzer
    custom: bool
    position_gap: int


@dataclass(frozen=True, slots=True)
class Token:
    term: str
    start: int
    end: int
    type: str
    position: int
    length: int = 1
    keyword: bool = False


def analyze(index: Index | None, body: dict[str, Any]) -> dict[str, Any]:
    """The `_analyze` response for `body`, on `index` (its mapping and settings) or globally."""
    for key in body:
        if key not in _FIELDS:
            raise XContentParseError(f"[analyze_request] unknown field [{key}]")
    texts = _texts(body.get("text"))
    analyzer = _string(body, "analyzer")
    tokenizer = body.get("tokenizer")
    filters = _list(body, "filter")
    char_filters = _list(body, "char_filter")
    normalizer = _string(body, "normalizer")
    field = _string(body, "field")
    explain = _flag(body.get("explain"))
    _validate(texts, index, analyzer, tokenizer, filters, char_filters, normalizer, field)
    chain = _chain(index, analyzer, tokenizer, filters, char_filters, normalizer, field)
    limit = (
        MAX_TOKEN_COUNT if index is None else index_setting(index.settings, "index.analyze.max_token_count")
    )
    if not explain:
        tokens = _run(chain.analyzer, None, texts, chain.position_gap, limit)
        return {"tokens": [_token_body(t) for t in tokens]}
    wanted = {a.lower() for a in _list(body, "attributes") if isinstance(a, str)}
    if not chain.custom:
        tokens = _run(chain.analyzer, None, texts, chain.position_gap, limit)
        return {
            "detail": {
                "custom_analyzer": False,
                "analyzer": {"name": chain.name, "tokens": [_detail(t, wanted) for t in tokens]},
            }
        }
    analyzer = chain.analyzer
    stages = [
        {
            "name": name,
            "tokens": [_detail(t, wanted) for t in _run(analyzer, i + 1, texts, chain.position_gap, limit)],
        }
        for i, name in enumerate(analyzer.filter_names)
    ]
    tokenized = _run(analyzer, 0, texts, chain.position_gap, limit)
    return {
        "detail": {
            "custom_analyzer": True,
            "charfilters": [],
            "tokenizer": {"name": analyzer.tokenizer_name, "tokens": [_detail(t, wanted) for t in tokenized]},
            "tokenfilters": stages,
        }
    }


# ---- the request -------------------------------------------------------------------------


def _texts(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise XContentParseError(f"[analyze_request] text doesn't support values of type: {token_name(value)}")


def _string(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None or isinstance(value, str):
        return value
    raise XContentParseError(f"[analyze_request] {key} doesn't support values of type: {token_name(value)}")


def _list(body: dict[str, Any], key: str) -> list[Any]:
    value = body.get(key)
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _flag(value: Any) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if value in ("true", "false"):
        return value == "true"
    raise IllegalArgument(f"Failed to parse value [{value}] as only [true] or [false] are allowed.")


def _validate(
    texts: list[str],
    index: Index | None,
    analyzer: str | None,
    tokenizer: Any,
    filters: list[Any],
    char_filters: list[Any],
    normalizer: str | None,
    field: str | None,
) -> None:
    """`AnalyzeAction.Request.validate`: every problem, numbered, in one error."""
    problems = []
    extra = tokenizer is not None or bool(filters) or bool(char_filters)
    if not texts:
        problems.append("text is missing")
    if index is None and normalizer is not None:
        problems.append("index is required if normalizer is specified")
    if normalizer is not None and (tokenizer is not None or analyzer is not None):
        problems.append("tokenizer/analyze should be null if normalizer is specified")
    if analyzer is not None and extra:
        problems.append("cannot define extra components on a named analyzer")
    if normalizer is not None and extra:
        problems.append("cannot define extra components on a named normalizer")
    if field is not None and extra:
        problems.append("cannot define extra components on a field-specific analyzer")
    if problems:
        raise ActionRequestValidation(*problems)


# ---- choosing the analysis ---------------------------------------------------------------


def _chain(
    index: Index | None,
    analyzer: str | None,
    tokenizer: Any,
    filters: list[Any],
    char_filters: list[Any],
    normalizer: str | None,
    field: str | None,
) -> Chain:
    """`TransportAnalyzeAction`'s order: a custom chain, then a named analyzer, a normalizer, the
    field's analyzer, and the default."""
    analysis: IndexAnalysis = DEFAULT_ANALYSIS if index is None else index.mapping.analysis
    scope = " global" if index is None else ""
    if tokenizer is not None or filters or char_filters:
        for char_filter in char_filters:
            name = _name("char_filter", char_filter)
            if name in ES_CHAR_FILTERS:
                raise NotSupported(f"the [{name}] char_filter", _WHY)
            raise IllegalArgument(f"failed to find{scope} char_filter under [{name}]")
        if tokenizer is None:
            chosen: tuple[str, Any] | None = ("keyword", keyword({}, "keyword"))
        else:
            _name("tokenizer", tokenizer)
            chosen = analysis.tokenizer(tokenizer, "_anonymous")
            if chosen is None:
                if tokenizer in ES_TOKENIZERS:
                    raise NotSupported(f"the [{tokenizer}] tokenizer", _WHY)
                raise IllegalArgument(f"failed to find{scope} tokenizer under [{tokenizer}]")
        chain: list[tuple[str, Any]] = []
        for spec in filters:
            name = _name("filter", spec)
            made = analysis.token_filter(spec, "_anonymous", (chosen[1], [f for _, f in chain]))
            if made is None:
                if name in ES_FILTERS:
                    raise NotSupported(f"the [{name}] filter", _WHY)
                raise IllegalArgument(f"failed to find{scope} filter under [{name}]")
            if tokenizer is None and made[0] not in NORMALIZER_FILTERS:
                raise IllegalArgument(f"Custom normalizer may not use filter [{made[0]}]")
            chain.append(made)
        return Chain("_custom", Analyzer("_custom", chosen[0], chosen[1], chain, 0), True, 0)
    gap = 0 if index is None else POSITION_INCREMENT_GAP
    if analyzer is not None:
        found = analysis.analyzer(analyzer) if analyzer != "default" or index is not None else None
        if found is not None:
            return Chain(analyzer, found, found.custom, gap if index is None else found.position_gap)
        if analyzer in ES_ANALYZERS:
            raise NotSupported(f"the [{analyzer}] analyzer", _WHY)
        raise IllegalArgument(f"failed to find{scope} analyzer [{analyzer}]")
    if normalizer is not None:
        if normalizer == "lowercase":
            return Chain(normalizer, _lowercase_keyword(), False, 0)
        own = analysis.normalizer(normalizer)
        if own is not None:
            return Chain(normalizer, own, True, 0)
        raise IllegalArgument(f"failed to find normalizer under [{normalizer}]")
    if field is not None:
        if index is None:
            raise IllegalArgument("analysis based on a specific field requires an index")
        ftype = index.mapping.field(field)
        if ftype is not None:
            if ftype.type in ("text", "completion"):  # a completion's inputs are analysed too
                field_analyzer = ftype.analyzer
                return Chain(
                    field_analyzer.name, field_analyzer, field_analyzer.custom, ftype.position_increment_gap
                )
            if ftype.type == "keyword":
                if ftype.normalizer == "lowercase":
                    return Chain("lowercase", _lowercase_keyword(), False, 0)
                return Chain("keyword", analysis.analyzer("keyword"), False, 0)
            raise IllegalArgument(
                f"Can't process field [{field}], Analysis requests are only supported on tokenized fields"
            )
    default = analysis.default
    return Chain("standard" if index is None else "default", default, False, gap)


def _lowercase_keyword() -> Analyzer:
    lowercase = DEFAULT_ANALYSIS.token_filter("lowercase", "lowercase", (keyword({}, "keyword"), []))
    assert lowercase is not None
    return Analyzer("lowercase", "keyword", keyword({}, "keyword"), [lowercase], 0)


def _name(kind: str, spec: Any) -> str:
    """The name of a tokenizer, filter or char_filter given by name or as `{"type": ...}`."""
    if isinstance(spec, dict):
        name = spec.get("type")
        if not isinstance(name, str):
            raise IllegalArgument(f"Missing [type] setting for anonymous {kind}: {spec}")
        return name
    if isinstance(spec, str):
        return spec
    raise XContentParseError(f"[analyze_request] {kind} doesn't support values of type: {token_name(spec)}")


# ---- running it --------------------------------------------------------------------------


def _run(analyzer: Analyzer, upto: int | None, texts: list[str], gap: int, limit: int) -> list[Token]:
    """`simpleAnalyze`: each value's tokens, positions and offsets continuing after the last
    value's with the position gap and an offset gap of one."""
    tokens: list[Token] = []
    last_position = -1
    last_offset = 0
    for text in texts:
        units = _utf16_offsets(text)
        found: list[Tok] = analyzer.tokens(text, upto)
        if len(tokens) + len(found) > limit:
            raise ElasticError(
                f"The number of tokens produced by calling _analyze has exceeded the allowed maximum of "
                f"[{limit}]. This limit can be set by changing the [index.analyze.max_token_count] index "
                "level setting.",
                error_type="illegal_state_exception",
                status=500,
            )
        for t in found:
            last_position += t.inc
            tokens.append(
                Token(
                    t.term,
                    last_offset + units(t.start),
                    last_offset + units(t.end),
                    t.type,
                    max(last_position, 0),
                    t.length,
                    t.keyword,
                )
            )
        last_offset += units(len(text)) + 1
        last_position += gap
    return tokens


def _utf16_offsets(text: str) -> Any:
    """Character offset -> UTF-16 offset (Lucene's offsets): the identity unless the text holds
    characters beyond the BMP, which count twice."""
    if text.isascii() or all(ord(c) < 0x10000 for c in text):
        return lambda i: i
    prefix = [0]
    for c in text:
        prefix.append(prefix[-1] + (2 if ord(c) >= 0x10000 else 1))
    return prefix.__getitem__


def _token_body(token: Token) -> dict[str, Any]:
    return {
        "token": token.term,
        "start_offset": token.start,
        "end_offset": token.end,
        "type": token.type,
        "position": token.position,
    }


def _detail(token: Token, wanted: set[str]) -> dict[str, Any]:
    """A token of `explain`, with the attributes Lucene's stream carries (all, or those asked)."""
    body = _token_body(token)
    extra = {
        "bytes": "[" + " ".join(f"{b:02x}" for b in token.term.encode()) + "]",
        "keyword": token.keyword,
        "positionLength": token.length,
        "termFrequency": 1,
    }
    body.update((k, v) for k, v in extra.items() if not wanted or k.lower() in wanted)
    return body
