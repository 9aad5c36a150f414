"""A search's `suggest` section, answered over the snapshots its hits were read from.

**Completion** (index/completion.py keeps each input as a sorted term of its field's keyword
column): per segment, the terms starting with the analysed prefix are one `searchsorted` range per
context asked (fuzzy: the range of the exact `prefix_length` characters, then edit distances over
those terms, vectorised; regex: one RE2 pass over the range's analysed forms). Weights are read
from the terms' fixed-width tails as a matrix, each (term, document) pair scored, deleted
documents dropped, one option per document kept (its best), then the best `size` of each
segment; the shards' are merged by score, as Elasticsearch merges them. Scores are Lucene's
CompletionScorer's: the weight, times the boost when one applies (a context's boost plus, fuzzy,
the length of the exact common prefix).

**Term**: each token of the analysed text, when the shard lacks it (`suggest_mode: missing`),
gets the field's terms within `max_edits` (Lucene's DirectSpellChecker's score: 1 - edits / the
shorter length, at least `accuracy`), ranked by score then document frequency.

Cost: O(matching terms) of numpy work per segment, and Python work for the options kept only.
Each shard computes its part where its segments are (`shard_suggestions`, the shard interface's
`suggest` phase, so shard actors answer their own), on the snapshot its hits were read from (a
shard actor whose one-shot search already freed it: its current one), and the coordinator merges
them (`_merge`): completion options by score, term frequencies summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

import numpy as np

from leafsearch.common.rawjson import RawJSON
from leafsearch.errors import ElasticError, IllegalArgument, ParsingError, SearchPhaseExecution
from leafsearch.index import completion, geo
from leafsearch.index.columns import KeywordColumn, TextColumn
from leafsearch.index.completion import CompletionField
from leafsearch.request.search_types import SearchRequest, SourceFilter
from leafsearch.request.suggest import CompletionSuggestion, ContextQuery, Fuzzy, TermSuggestion
from leafsearch.search.fetch import filter_source
from leafsearch.search.query.fuzzy import edit_distances, prefix_edit_distances
from leafsearch.search.query.term_selection import prefix_range, term_pattern
from leafsearch.search.shard_api import ShardSearch, ShardSuggest, each_phase
from leafsearch.search.targets import Target

_WEIGHT_DIGITS = 10
_POWERS = 10 ** np.arange(_WEIGHT_DIGITS - 1, -1, -1, dtype=np.int64)


@dataclass(slots=True)
class _Option:
    score: float
    text: str
    doc: int  # in its segment
    segment: Any
    contexts: dict[str, list[str]] | None


def suggest(
    pool: Executor | None, shards: Sequence[ShardSearch], request: SearchRequest, targets: Sequence[Target]
) -> dict[str, Any]:
    """The response's `suggest` object, by suggestion name (`typed_keys`: `completion#name`):
    each shard's part (`shard_suggestions`, through the shard interface, so a shard actor
    computes its own) merged."""
    messages = [ShardSuggest(request, i) for i in range(len(shards))]
    try:
        parts = each_phase(pool, shards, "suggest", messages)
        return {
            _key(s, request.typed_keys): _merge(s, [p[k] for p in parts], targets)
            for k, s in enumerate(request.suggest)
        }
    except SearchPhaseExecution:
        raise
    except ElasticError as e:
        if e.status == 400:
            raise SearchPhaseExecution(e) from None
        raise


def shard_suggestions(target: Target, message: ShardSuggest) -> list[Any]:
    """One shard's part of each suggestion: its best completion options, rendered with their
    score and text (`_merge` orders them), or, for a term suggestion, per token of the text the
    token's document frequency on the shard and its candidate terms' (the coordinator sums them
    before it applies what depends on frequencies)."""
    request = message.request
    return [
        _term_part(s, target)
        if isinstance(s, TermSuggestion)
        else _completion_part(s, target, request.source)
        for s in request.suggest
    ]


def _merge(s: Any, parts: list[Any], targets: Sequence[Target]) -> list[dict[str, Any]]:
    if isinstance(s, TermSuggestion):
        return _term_merge(s, parts, targets)
    found = [
        (-score, text, shard, i, body)
        for shard, part in enumerate(parts)
        for i, (score, text, body) in enumerate(part)
    ]
    found.sort(key=lambda o: o[:4])
    kept: list[dict[str, Any]] = []
    texts: set[str] = set()
    for _, text, _, _, body in found:
        if s.skip_duplicates and text in texts:
            continue
        texts.add(text)
        kept.append(body)
        if len(kept) == s.size:
            break
    return [{"text": s.text, "offset": 0, "length": len(s.text), "options": kept}]


def _key(s: Any, typed_keys: bool) -> str:
    return f"{'term' if isinstance(s, TermSuggestion) else 'completion'}#{s.name}" if typed_keys else s.name


def _completion_part(
    s: CompletionSuggestion, target: Target, source: SourceFilter
) -> list[tuple[float, str, dict[str, Any]]]:
    """The shard's best `size` options (skipping duplicates as asked): (score, text, rendered)."""
    ft = target.mapping.field(s.field)
    if not isinstance(ft, CompletionField):
        raise IllegalArgument(f"Field [{s.field}] is not a completion suggest field")
    keys = _keys(s, ft)
    form = (
        s.text if s.regex else completion.analysed(_analyzer(s, target, ft), s.text, ft.preserve_separators)
    )
    found: list[_Option] = []
    for view in target.searcher.views:
        col = view.segment.column(s.field)
        if isinstance(col, KeywordColumn) and len(col.terms):
            found.extend(_segment_options(s, form, keys, col, view))
    found.sort(key=lambda o: (-o.score, o.text, o.doc))
    kept: list[tuple[float, str, dict[str, Any]]] = []
    texts: set[str] = set()
    for option in found:
        if s.skip_duplicates and option.text in texts:
            continue
        texts.add(option.text)
        kept.append((option.score, option.text, _render(option, target, source)))
        if len(kept) == s.size:
            break
    return kept


def _analyzer(s: CompletionSuggestion, target: Target, ft: CompletionField) -> Any:
    if s.analyzer is None:
        return ft.search_analyzer
    found = target.mapping.analysis.analyzer(s.analyzer)
    if found is None:
        raise IllegalArgument(f"analyzer [{s.analyzer}] doesn't exists")
    return found


def _keys(s: CompletionSuggestion, ft: CompletionField) -> list[tuple[bytes, float, bool, bool]]:
    """(term prefix before the analysed form, boost, whether the context value is a prefix,
    whether it is a context's) per range to read."""
    if not s.contexts:
        return [(completion.PLAIN, 0.0, False, False)]
    keys = []
    for c in s.contexts:
        spec = ft.contexts.get(c.name)
        if spec is None:
            raise IllegalArgument(f"context [{c.name}] is not defined for field [{s.field}]")
        if spec.kind == "geo":
            keys.extend(_geo_keys(c, spec.precision))
            continue
        if c.point is not None:
            raise ParsingError("category context must be a string, number or boolean, not [START_OBJECT]")
        key = completion.context_key(c.name, c.value)
        keys.append((key[:-1] if c.prefix else key, c.boost, c.prefix, True))
    return keys


def _geo_keys(c: ContextQuery, indexed: int) -> list[tuple[bytes, float, bool, bool]]:
    """A geo context query's cells (GeoContextMapping): the point's cell at the smaller of the
    query's and the mapping's precisions, with its 8 neighbours when that is the mapping's; or
    with the cell and neighbours of each shorter `neighbours` precision. A cell shorter than the
    indexed geohashes matches them by prefix."""
    try:
        lat, lon = c.point if c.point is not None else geo.parse_point_text(c.value)
    except geo.GeoError as e:
        raise ParsingError(f"[geo] failed to parse field [context]: {e}") from None
    cell = completion.geohash(lat, lon, min(indexed, c.precision or geo.MAX_GEOHASH_PRECISION))
    cells = {cell}
    if not c.neighbours and len(cell) == indexed:
        cells.update(completion.geohash_neighbours(cell))
    for length in c.neighbours:
        if length < len(cell):
            cells.add(cell[:length])
            cells.update(completion.geohash_neighbours(cell[:length]))
    keys = []
    for found in sorted(cells):
        key = completion.context_key(c.name, found)
        prefix = len(found) < indexed
        keys.append((key[:-1] if prefix else key, c.boost, prefix, True))
    return keys


def _segment_options(
    s: CompletionSuggestion,
    form: str,
    keys: list[tuple[bytes, float, bool, bool]],
    col: KeywordColumn,
    view: Any,
) -> list[_Option]:
    """The segment's best `size` options (distinct documents), over every context range."""
    all_ords, all_scores, shown = [], [], []
    for key, boost, context_prefix, in_context in keys:
        ords, extra = _matching_terms(s, form, key, context_prefix, col)
        if not len(ords):
            continue
        weights = _weights(np.asarray(col.terms[ords])).astype(np.float64)
        boosts = boost + extra
        all_ords.append(ords)
        all_scores.append(np.where(boosts > 0, weights * boosts, weights))
        shown.append(np.full(len(ords), in_context))
    if not all_ords:
        return []
    ords, scores, which = np.concatenate(all_ords), np.concatenate(all_scores), np.concatenate(shown)
    docs_list, starts = col.postings
    counts = starts[ords + 1] - starts[ords]
    pair_term = np.repeat(np.arange(len(ords)), counts)
    firsts = np.repeat(starts[ords], counts)
    offsets = np.arange(len(pair_term)) - np.repeat(np.cumsum(counts) - counts, counts)
    pair_docs = np.asarray(docs_list)[firsts + offsets].astype(np.int64)
    if view.live is not None:
        alive = view.live[pair_docs]
        pair_term, pair_docs = pair_term[alive], pair_docs[alive]
    if not len(pair_docs):
        return []
    order = np.lexsort((ords[pair_term], -scores[pair_term]))  # best first; ties by term order
    _, first = np.unique(pair_docs[order], return_index=True)  # each document's best pair
    best = order[np.sort(first)]
    out: list[_Option] = []
    texts: set[str] = set()
    for p in best.tolist():
        t = int(pair_term[p])
        term = bytes(col.terms[ords[t]])
        _, text, _ = completion.split_term(term)
        if s.skip_duplicates and text in texts:
            continue
        texts.add(text)
        contexts = completion.term_context(term) if which[t] else None
        out.append(_Option(float(scores[t]), text, int(pair_docs[p]), view.segment, contexts))
        if len(out) == s.size:
            break
    return out


def _matching_terms(
    s: CompletionSuggestion, form: str, key: bytes, context_prefix: bool, col: KeywordColumn
) -> tuple[np.ndarray, np.ndarray]:
    """Ordinals of the terms matching under `key`, and the boost each adds (fuzzy)."""
    terms = col.terms
    fuzzy = s.fuzzy
    exact = form if not (s.regex or fuzzy) else "" if s.regex else form[: fuzzy.prefix_length]
    if fuzzy is not None and len(form) < fuzzy.min_length:
        fuzzy, exact = None, form
    lo, hi = prefix_range(terms, key + (b"" if context_prefix else exact.encode()))
    ords = np.arange(lo, hi)
    if not len(ords) or (fuzzy is None and not s.regex and not context_prefix):
        return ords, np.zeros(len(ords))
    forms = [_analysed_part(t, key, context_prefix) for t in np.asarray(terms[lo:hi]).tolist()]
    if context_prefix and not s.regex and fuzzy is None:
        keep = np.array([f.startswith(form) for f in forms], dtype=bool)
        return ords[keep], np.zeros(int(keep.sum()))
    if s.regex:
        pattern = term_pattern("regexp", f"({form}).*", False, s.regex_flags, s.max_determinized_states)
        keep = pattern.select([f.encode() for f in forms])
        return ords[keep], np.zeros(int(keep.sum()))
    assert fuzzy is not None
    keep, boosts = _fuzzy_matches(forms, form, fuzzy)
    return ords[keep], boosts[keep]


def _analysed_part(term: bytes, key: bytes, context_prefix: bool) -> str:
    head = term.split(completion.PART_SEP.encode(), 1)[0]
    if context_prefix:  # past the context value's own end
        return head.split(completion.CONTEXT_SEP.encode(), 2)[2].decode()
    return head[len(key) :].decode()


def _fuzzy_matches(forms: list[str], query: str, fuzzy: Fuzzy) -> tuple[np.ndarray, np.ndarray]:
    """Which analysed forms start with a prefix within the allowed edits of `query` (its first
    `prefix_length` characters exact), and each one's boost: the common prefix's length."""
    edits = _edits(fuzzy.fuzziness, query)
    cut = [f[: len(query) + edits] for f in forms]  # no longer prefix can be nearer
    best = prefix_edit_distances(cut, query, edits, fuzzy.transpositions)
    head = query[: fuzzy.prefix_length]
    keep = (best <= edits) & np.fromiter((f.startswith(head) for f in forms), dtype=bool, count=len(forms))
    common = np.fromiter((_common_prefix(f, query) for f in forms), dtype=np.float64, count=len(forms))
    return keep, common


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def _edits(fuzziness: str, text: str) -> int:
    if fuzziness.startswith("AUTO"):
        low, high = 3, 6
        if ":" in fuzziness:
            try:
                low, high = (int(x) for x in fuzziness[5:].split(","))
            except ValueError:
                raise IllegalArgument(f"failed to parse [{fuzziness}] as a fuzziness value") from None
        return 0 if len(text) < low else 1 if len(text) < high else 2
    try:
        return max(0, min(int(float(fuzziness)), 2))
    except ValueError:
        raise IllegalArgument(f"failed to parse [{fuzziness}] as a fuzziness value") from None


def _weights(terms: np.ndarray) -> np.ndarray:
    """The weights at the ends of stored terms (fixed-width bytes), as one matrix operation."""
    width = terms.dtype.itemsize
    matrix = terms.view(np.uint8).reshape(len(terms), width)
    lengths = np.char.str_len(terms).astype(np.int64)
    columns = lengths[:, None] - _WEIGHT_DIGITS + np.arange(_WEIGHT_DIGITS)
    digits = matrix[np.arange(len(terms))[:, None], columns].astype(np.int64) - ord("0")
    return digits @ _POWERS


def _render(option: _Option, target: Target, flt: SourceFilter) -> dict[str, Any]:
    doc = np.array([option.doc], dtype=np.int64)
    body: dict[str, Any] = {
        "text": option.text,
        "_index": target.index.name,
        "_id": option.segment.doc_ids(doc)[0],
        "_score": option.score,
    }
    raw = filter_source(option.segment.sources(doc)[0], flt)
    if raw is not None:
        body["_source"] = RawJSON(raw)
    if option.contexts:
        body["contexts"] = option.contexts
    return body


# ---------------------------------------------------------------------------------------------
# term


def _term_part(s: TermSuggestion, target: Target) -> list[tuple[int, dict[str, int]]]:
    """Per token of the text: its document frequency on the shard, and the shard's terms within
    `max_edits` of it (sharing its `prefix_length` first characters) with theirs."""
    ft = target.mapping.field(s.field)
    if ft is None:
        raise IllegalArgument(f"no mapping found for field [{s.field}]")
    columns = _columns(target, s.field)
    out = []
    for token, _, _ in _tokens(s.text, _term_analyzer(ft)):
        candidates = _candidates(s, columns, token) if len(token) >= s.min_word_length else []
        freqs = {text: _doc_freq(columns, text) for text in candidates}
        out.append((_doc_freq(columns, token), freqs))
    return out


def _term_analyzer(ft: Any) -> Any:
    return ft.search_analyzer if ft.kind == "text" else None


def _term_merge(s: TermSuggestion, parts: list[Any], targets: Sequence[Target]) -> list[dict[str, Any]]:
    """Each token's options from the shards' frequencies summed (Lucene's DirectSpellChecker's
    score: 1 - edits / the shorter length, at least `accuracy`), best first."""
    ft = targets[0].mapping.field(s.field) if targets else None
    tokens = _tokens(s.text, _term_analyzer(ft) if ft is not None else None)
    entries = []
    for k, (token, start, end) in enumerate(tokens):
        freq = sum(part[k][0] for part in parts)
        found: dict[str, int] = {}
        for part in parts:
            for text, n in part[k][1].items():
                found[text] = found.get(text, 0) + n
        options: list[dict[str, Any]] = []
        if len(token) >= s.min_word_length and not (s.suggest_mode == "missing" and freq > 0):
            options = _term_options(s, token, freq, found)
        entries.append({"text": token, "offset": start, "length": end - start, "options": options})
    return entries


def _tokens(text: str, analyzer: Any) -> list[tuple[str, int, int]]:
    if analyzer is None:
        return [(text, 0, len(text))]
    return [(t.term, t.start, t.end) for t in analyzer.tokens(text)]


def _columns(target: Target, field: str) -> list[Any]:
    cols = []
    for view in target.searcher.views:
        col = view.segment.column(field)
        if isinstance(col, TextColumn | KeywordColumn):
            cols.append(col)
    return cols


def _doc_freq(columns: list[Any], term: str) -> int:
    total = 0
    for col in columns:
        if isinstance(col, TextColumn):
            total += col.doc_freq(term)
        else:
            o = col.lookup(term)
            total += col.doc_count(o, o + 1) if o >= 0 else 0
    return total


def _candidates(s: TermSuggestion, columns: list[Any], token: str) -> list[str]:
    """The terms within `max_edits` of a token, sharing its first `prefix_length` characters."""
    candidates: set[str] = set()
    prefix = token[: s.prefix_length]
    for col in columns:
        lo, hi = prefix_range(col.terms, prefix.encode())
        for t in np.asarray(col.terms[lo:hi]).tolist():
            text = t.decode()
            if text != token and abs(len(text) - len(token)) <= s.max_edits:
                candidates.add(text)
    if not candidates:
        return []
    ordered = sorted(candidates)
    distances = edit_distances(ordered, token, True)
    return [text for text, d in zip(ordered, distances.tolist(), strict=True) if d <= s.max_edits]


def _term_options(s: TermSuggestion, token: str, freq: int, found: dict[str, int]) -> list[dict]:
    if not found:
        return []
    ordered = sorted(found)
    distances = edit_distances(ordered, token, True)
    options = []
    for text, d in zip(ordered, distances.tolist(), strict=True):
        n = found[text]
        if n < s.min_doc_freq or (s.suggest_mode == "popular" and n <= freq):
            continue
        score = 1.0 - d / min(len(text), len(token))
        if score < s.accuracy:
            continue
        options.append({"text": text, "score": score, "freq": n})
    if s.sort == "frequency":
        options.sort(key=lambda o: (-o["freq"], -o["score"], o["text"]))
    else:
        options.sort(key=lambda o: (-o["score"], -o["freq"], o["text"]))
    return options[: s.size]
