"""Highlighting: the fragments of a hit's text fields around what the query matched, as
Elasticsearch's unified highlighter gives them.

`Highlighter.prepare` runs once per shard and page: it resolves the `fields` patterns against the
mapping (text and keyword fields) and extracts from the query (or each field's
`highlight_query`) what can match: terms (`term`, `terms`, `match`, the analysed texts of
`multi_match`, `query_string` and `simple_query_string`), phrases (`match_phrase`: the terms at
their relative positions, so only the phrase is highlighted), and term patterns (`prefix`,
`wildcard`, `regexp`, and the last term of `match_phrase_prefix`). `must_not` clauses highlight
nothing. Per hit, each field's values are analysed with the field's analyzer (the tokens'
character offsets), matched tokens are wrapped in the tags, and the text is cut into passages:
sentences, a long sentence cut at word boundaries to about `fragment_size` characters around its
matches; the best `number_of_fragments` passages (most matched tokens) are kept in text order, or
by score with `order: score`; `number_of_fragments: 0` gives each matching value whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

import orjson

from leafsearch.common.settings import index_setting
from leafsearch.errors import IllegalArgument
from leafsearch.index.analysis import standard_tokens
from leafsearch.request import query_dsl as dsl
from leafsearch.request.highlight import FieldHighlight, HighlightSpec
from leafsearch.search.fetch import _source_path, _source_values
from leafsearch.search.query.context import QueryContext
from leafsearch.search.query.rewrites import (
    rewrite_multi_match,
    rewrite_query_string,
    rewrite_simple_query_string,
)
from leafsearch.search.query.term_selection import TermPattern, term_pattern
from leafsearch.search.query.text_queries import search_analyzer

_SENTENCE_END = re.compile(r"[.!?\u3002]+[\"')\]]*\s+|\n\s*")
_WORD = re.compile(r"\w+", re.UNICODE)
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;", "/": "&#x2F;"})


@dataclass
class _Matches:
    """What may match in one field: terms, phrases (slots of alternatives at relative positions)
    and term patterns."""

    terms: set[str]
    phrases: list[tuple[tuple[tuple[str, ...], ...], tuple[int, ...]]]
    patterns: list[TermPattern]

    def empty(self) -> bool:
        return not (self.terms or self.phrases or self.patterns)


def _new() -> _Matches:
    return _Matches(set(), [], [])


class _Extractor:
    """Walks a query, gathering per field what it matches; `None` as field: any field."""

    def __init__(self, ctx: QueryContext) -> None:
        self.ctx = ctx
        self.by_field: dict[str, _Matches] = {}

    def of(self, field: str) -> _Matches:
        return self.by_field.setdefault(field, _new())

    def walk(self, q: Any) -> None:
        ctx = self.ctx
        if isinstance(q, dsl.Match):
            self.of(q.field).terms.update(
                search_analyzer(ctx, q.analyzer, q.field).terms(dsl.scalar_text(q.query))
            )
        elif isinstance(q, (dsl.MatchPhrase, dsl.MatchPhrasePrefix)):
            analyzer = search_analyzer(ctx, q.analyzer, q.field, quote=True)
            terms, positions = analyzer.positions([dsl.scalar_text(q.query)], 0)
            if isinstance(q, dsl.MatchPhrasePrefix) and terms:
                self.of(q.field).patterns.append(term_pattern("prefix", terms[-1], False))
                terms, positions = terms[:-1], positions[:-1]
            self._phrase(q.field, terms, positions, q.slop)
        elif isinstance(q, dsl.Term):
            self.of(q.field).terms.add(dsl.scalar_text(q.value))
        elif isinstance(q, dsl.Terms):
            self.of(q.field).terms.update(dsl.scalar_text(v) for v in q.values)
        elif isinstance(q, dsl.Prefix):
            self.of(q.field).patterns.append(term_pattern("prefix", q.value, q.case_insensitive))
        elif isinstance(q, dsl.Wildcard):
            self.of(q.field).patterns.append(term_pattern("wildcard", q.value, q.case_insensitive))
        elif isinstance(q, dsl.Regexp):
            pattern = term_pattern("regexp", q.value, q.case_insensitive, q.flags, q.max_determinized_states)
            self.of(q.field).patterns.append(pattern)
        elif isinstance(q, dsl.MultiMatch):
            self.walk(rewrite_multi_match(q, ctx))
        elif isinstance(q, dsl.QueryString):
            self.walk(rewrite_query_string(q, ctx))
        elif isinstance(q, dsl.SimpleQueryString):
            self.walk(rewrite_simple_query_string(q, ctx))
        elif isinstance(q, dsl.Query):
            for f in fields(q):
                if f.name == "must_not":
                    continue
                value = getattr(q, f.name)
                if isinstance(value, dsl.Query):
                    self.walk(value)
                elif isinstance(value, tuple):
                    for item in value:
                        if isinstance(item, dsl.Query):
                            self.walk(item)

    def _phrase(self, field: str, terms: list[str], positions: list[int], slop: int) -> None:
        if not terms:
            return
        if len(set(positions)) == 1 or slop > 0:  # one position, or any order: the terms themselves
            self.of(field).terms.update(terms)
            return
        slots: list[tuple[str, ...]] = []
        at: list[int] = []
        for term, position in zip(terms, positions, strict=True):
            if at and at[-1] == position:
                slots[-1] = (*slots[-1], term)
            else:
                slots.append((term,))
                at.append(position)
        self.of(field).phrases.append((tuple(slots), tuple(p - at[0] for p in at)))


@dataclass
class _Field:
    path: str
    source_path: str
    options: FieldHighlight
    analyzer: Any  # None: a keyword field (its value is one term, normalized)
    normalize: Any
    matches: _Matches


class Highlighter:
    """A page's highlighting on one shard."""

    def __init__(self, spec: HighlightSpec, fields_: list[_Field], index: str, max_offset: int) -> None:
        self.spec, self.fields, self.index, self.max_offset = spec, fields_, index, max_offset

    @classmethod
    def prepare(cls, spec: HighlightSpec, query: dsl.Query, ctx: QueryContext, settings: dict) -> Highlighter:
        mapping = ctx.mapping
        main: _Extractor | None = None
        chosen: list[_Field] = []
        seen: set[str] = set()
        for options in spec.fields:
            for path in mapping.resolve_fields(options.pattern):
                ft = mapping.field(path)
                if ft is None or ft.kind not in ("text", "keyword") or path in seen:
                    continue
                if ft.kind == "keyword" and "*" in options.pattern and not ft.index:
                    continue
                seen.add(path)
                if options.highlight_query is not None:
                    extractor = _Extractor(ctx)
                    extractor.walk(options.highlight_query)
                else:
                    if main is None:
                        main = _Extractor(ctx)
                        main.walk(query)
                    extractor = main
                matches = _merged(extractor, path, options.require_field_match)
                if matches.empty() and options.no_match_size == 0:
                    continue
                analyzer = ft.analyzer if ft.kind == "text" else None
                chosen.append(
                    _Field(path, _source_path(mapping, path), options, analyzer, ft.normalize, matches)
                )
        max_offset = index_setting(settings, "index.highlight.max_analyzed_offset")
        return cls(spec, chosen, ctx.index_name or "", max_offset)

    def render(self, raw: bytes | None, doc: int) -> dict[str, list[str]] | None:
        """The `highlight` object of one hit from its stored source, or None if nothing matched."""
        if raw is None or not self.fields:
            return None
        source = orjson.loads(raw)
        out: dict[str, list[str]] = {}
        for field in self.fields:
            values = [_text(v) for v in _source_values(source, field.source_path)]
            texts = [v for v in values if v is not None]
            fragments = self._field(field, texts, doc)
            if fragments:
                out[field.path] = fragments
        return out or None

    def _field(self, field: _Field, texts: list[str], doc: int) -> list[str]:
        options = field.options
        limit = options.max_analyzed_offset
        passages: list[tuple[int, int, str]] = []  # (-score, order, fragment)
        for value_index, text in enumerate(texts):
            if limit is None and len(text) > self.max_offset:
                raise IllegalArgument(
                    f"The length [{len(text)}] of field [{field.path}] in doc[{doc}]/index[{self.index}] "
                    f"exceeds the [index.highlight.max_analyzed_offset] limit [{self.max_offset}]. To avoid "
                    "this error, set the query parameter [max_analyzed_offset] to a value less than index "
                    f"setting [{self.max_offset}] and this will tolerate long field values by truncating "
                    "them."
                )
            analysed = text if limit is None else text[:limit]
            spans = _spans(field, analysed) if not field.matches.empty() else []
            if not spans:
                continue
            if options.number_of_fragments == 0:
                passages.append((-len(spans), value_index, self._tag(text, 0, len(text), spans, options)))
                continue
            for start, end, count in _passages(text, spans, options.fragment_size):
                inside = [s for s in spans if s[0] >= start and s[1] <= end]
                passages.append(
                    (-count, value_index * (1 << 32) + start, self._tag(text, start, end, inside, options))
                )
        if not passages:
            if options.no_match_size > 0 and texts:
                return [self._encode(_no_match(texts[0], options.no_match_size))]
            return []
        if options.number_of_fragments:
            passages.sort(key=lambda p: (p[0], p[1]))
            passages = passages[: options.number_of_fragments]
        if not options.order_by_score or options.number_of_fragments == 0:
            passages.sort(key=lambda p: p[1])
        return [p[2] for p in passages]

    def _encode(self, text: str) -> str:
        return text.translate(_HTML) if self.spec.html else text

    def _tag(
        self, text: str, start: int, end: int, spans: list[tuple[int, int]], options: FieldHighlight
    ) -> str:
        pieces = []
        at = start
        for s, e in spans:
            if s < at:
                continue
            pieces += [self._encode(text[at:s]), options.pre_tag, self._encode(text[s:e]), options.post_tag]
            at = e
        pieces.append(self._encode(text[at:end]))
        return "".join(pieces)


def _merged(extractor: _Extractor, path: str, require_field_match: bool) -> _Matches:
    if require_field_match:
        return extractor.by_field.get(path) or _new()
    merged = _new()
    for m in extractor.by_field.values():
        merged.terms |= m.terms
        merged.phrases += m.phrases
        merged.patterns += m.patterns
    return merged


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def _spans(field: _Field, text: str) -> list[tuple[int, int]]:
    """Character spans of the matched tokens of one value, sorted, overlaps merged."""
    matches = field.matches
    if field.analyzer is None:
        term = field.normalize(text)
        hit = term in matches.terms or any(p.select([term.encode()])[0] for p in matches.patterns)
        return [(0, len(text))] if hit and text else []
    terms, starts, ends, positions = _analysed(field.analyzer, text)
    marked = [t in matches.terms for t in terms]
    if matches.patterns:
        distinct = sorted(set(terms))
        encoded = [d.encode() for d in distinct]
        hits: set[str] = set()
        for pattern in matches.patterns:
            hits.update(d for d, ok in zip(distinct, pattern.select(encoded).tolist(), strict=True) if ok)
        marked = [m or t in hits for m, t in zip(marked, terms, strict=True)]
    if matches.phrases:
        at: dict[int, list[int]] = {}
        for i, p in enumerate(positions):
            at.setdefault(p, []).append(i)
        for slots, offsets in matches.phrases:
            for start in {positions[i] for i, t in enumerate(terms) if t in slots[0]}:
                chosen = []
                for slot, offset in zip(slots, offsets, strict=True):
                    found = [i for i in at.get(start + offset, ()) if terms[i] in slot]
                    if not found:
                        break
                    chosen += found
                else:
                    for i in chosen:
                        marked[i] = True
    spans: list[tuple[int, int]] = []
    for s, e in sorted((starts[i], ends[i]) for i, m in enumerate(marked) if m):
        if spans and s < spans[-1][1]:
            spans[-1] = (spans[-1][0], max(e, spans[-1][1]))
        else:
            spans.append((s, e))
    return spans


def _analysed(analyzer: Any, text: str) -> tuple[list[str], list[int], list[int], list[int]]:
    """(terms, start offsets, end offsets, positions) of a value: the standard analyzer's straight
    from its expression, any other's from its token stream."""
    if analyzer.standard:
        found = standard_tokens(text)
        return (
            [t for t, _, _ in found],
            [s for _, s, _ in found],
            [e for _, _, e in found],
            list(range(len(found))),
        )
    toks = analyzer.tokens(text)
    positions = []
    position = -1
    for t in toks:
        position += t.inc
        positions.append(position)
    return [t.term for t in toks], [t.start for t in toks], [t.end for t in toks], positions


def _passages(text: str, spans: list[tuple[int, int]], size: int) -> list[tuple[int, int, int]]:
    """(start, end, matched tokens) of the passages holding the spans: the sentence around them,
    a sentence longer than `size` cut at word boundaries into about `size` characters from the
    word of its first match."""
    bounds = [0, *(m.end() for m in _SENTENCE_END.finditer(text)), len(text)]
    out: list[tuple[int, int, int]] = []
    i = 0
    sentence = 0
    while i < len(spans):
        s, _ = spans[i]
        while bounds[sentence + 1] <= s and sentence + 1 < len(bounds) - 1:
            sentence += 1
        lo, hi = bounds[sentence], bounds[sentence + 1]
        if hi - lo > size:
            start = max(lo, text.rfind(" ", lo, s) + 1) if s - lo > size else lo
            end = min(hi, _word_end(text, start + max(size, 1)))
            end = max(end, spans[i][1])
        else:
            start, end = lo, hi
        count = 0
        while i < len(spans) and spans[i][0] < end:
            end = max(end, spans[i][1])
            count += 1
            i += 1
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        out.append((start, end, count))
    return out


def _word_end(text: str, at: int) -> int:
    """The end of the word `at` falls in (`at` itself between words)."""
    if at >= len(text):
        return len(text)
    match = _WORD.match(text, at)
    return match.end() if match and at > 0 and text[at - 1].isalnum() else at


def _no_match(text: str, size: int) -> str:
    """`no_match_size`: the field's first characters, to the end of the word the limit falls in."""
    if len(text) <= size:
        return text
    return text[: _word_end(text, size)].rstrip()
