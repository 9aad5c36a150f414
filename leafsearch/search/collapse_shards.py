"""A collapsed page over the shard interface: the same rounds for shards of this process and for
shard actors.

Each shard keeps its own collapsed list (`collapse.collapsed` over its matches: its best hit per
key in sort order, cached like any list of every match). A key's best hit over the search is the
best of the shards' bests, and the key belongs after the cursor C when no shard has a hit of it
at or before C. A page is found in rounds of one `ShardQuery` per shard (`ShardQuery.collapse`):

1. candidates: each shard's first `2 * (from + size)` keys whose best hit on it comes after C;
2. check: each shard is sent the candidate keys of the others, and answers the best hit of each
   after C, or that it has one at or before C (the key was shown before the cursor: it is
   dropped from the page, on every shard).

Why it is exact: a key on the page has its best hit on some shard s, where it is a candidate
unless s's candidates stopped before it. So with V the first, in sort order, of the last
candidates of the shards that have more, every key whose best hit comes at or before V is among
the candidates, and the checks give its best hit over every shard: the page is exact if it ends
at or before V. When it does not (a shard's candidates were mostly keys shown before the cursor,
which only the other shards know), the shards whose candidates stop before the page's end are
asked for twice as many more (and the new keys checked), until it does: so each key appears
exactly once over a walk, at its best hit. Calls per page: 2 per shard (1 for a search of one
shard), plus, for each doubling, one to each shard asked for more and one to each shard with new
keys to check; then the fetch. Measured: 2.0 to 2.6 per shard before the fetch
(bench/RESULTS.md, "Collapse on shard actors"). `inner_hits` are one search per hit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from leafsearch.errors import ShardFailed
from leafsearch.request.search_types import SHARD_DOC, SearchRequest, SortSpec
from leafsearch.search.guard import MATCH_BYTES, SORT_KEY_BYTES, SearchGuard
from leafsearch.search.hitlist import HitList, effective_sort
from leafsearch.search.shard_api import (
    CollapseAsk,
    CollapseFound,
    ShardContextId,
    ShardQuery,
    ShardSearch,
    ShardTopDocs,
    SortPlan,
    each_phase,
    merge_columns,
)
from leafsearch.search.sort_keys import SortColumn

if TYPE_CHECKING:
    from leafsearch.search.services import SearchServices
    from leafsearch.search.targets import Target

#: A shard's first round asks this many times the page's `from + size` keys: a few keys shown
#: before the cursor among them do not cost another round.
FIRST_ROUND_FACTOR = 2


# ---------------------------------------------------------------------------------------------
# the shard's side


def shard_round(
    services: SearchServices, target: Target, query: ShardQuery, guard: SearchGuard
) -> ShardTopDocs:
    """A shard's answer to `query.collapse` on `target` (its snapshot): the candidates, then the
    checked keys' best hits after the cursor, from its collapsed list. O(log list + answer) once
    the list is built (O(matches log matches), kept in the HitList cache)."""
    ask = query.collapse
    assert ask is not None
    request = query.request
    partials: list = []
    with_aggs = None
    if query.aggs:
        from leafsearch.search.aggregations import collect
        from leafsearch.search.top_hits import shard_aggs

        tree = shard_aggs(services, request, target, query.now_millis)
        with_aggs = lambda _t, view, docs, ctx, scores=None: collect(tree, view, docs, ctx, scores)  # noqa: E731
    listed = services.hitlists.get_or_build(
        [target], dataclasses.replace(request, search_after=None, from_=0), with_aggs=with_aggs, guard=guard
    )
    start = 0 if request.search_after is None else _position_after(listed, request, query.shard_index)
    first = min(start + ask.skip, len(listed))
    last = min(first + ask.count, len(listed))
    rows = np.arange(first, last, dtype=np.int64)
    used = np.empty(0, np.int64)
    missing_used = False
    if ask.check is not None or ask.check_missing:
        found = _rows_of(listed, ask.check)
        used = np.flatnonzero((found >= 0) & (found < start))
        after = found[found >= start]
        missing = _missing_row(listed) if ask.check_missing else -1
        missing_used = 0 <= missing < start
        if missing >= start:
            after = np.append(after, missing)
        rows = np.concatenate([rows, after])
    columns = [_shown_column(c.take(rows), query.shard_index) for c in listed.columns]
    assert listed.collapse is not None
    return ShardTopDocs(
        query.shard_index,
        listed.total,
        listed.max_score,
        listed.doc[rows],
        None if listed.score is None else listed.score[rows],
        columns,
        listed.agg_partials if query.aggs else partials,
        listed.timed_out,
        terminated_early=listed.terminated_early,
        collapse=CollapseFound(
            _compact(listed.collapse.take(rows)), last - first, last >= len(listed), used, missing_used
        ),
    )


def _position_after(listed: HitList, request: SearchRequest, shard_index: int) -> int:
    """Where the cursor falls in a shard's list, whose `_shard_doc` values are its own docs."""
    from leafsearch.search.phases import _after_keys

    after = list(request.search_after)
    for i, spec in enumerate(effective_sort(request)):
        if spec.field == SHARD_DOC and i < len(after) and type(after[i]) is int:
            after[i] -= shard_index << 32  # (`_shard_doc` is shard index << 32 | doc)
    return listed.position_after(_after_keys(listed, dataclasses.replace(request, search_after=after)))


def _rows_of(listed: HitList, keys: np.ndarray | None) -> np.ndarray:
    """The row of each key's hit in a collapsed list, -1 for a key it does not hold. O(k log n)."""
    column, index = listed.collapse, listed.collapse_index
    assert column is not None and index is not None
    if keys is None or not len(keys):
        return np.empty(0, np.int64)
    wanted = keys
    known = np.ones(len(keys), bool)
    if column.kind == "keyword":
        terms = column.terms if column.terms is not None else np.empty(0, "S1")
        if not len(terms):
            return np.full(len(keys), -1, np.int64)
        wanted = np.searchsorted(terms, keys)
        known = terms[np.minimum(wanted, len(terms) - 1)] == keys
    ordered = column.values[index]
    at = np.minimum(np.searchsorted(ordered, wanted), max(len(ordered) - 1, 0))
    if not len(ordered):
        return np.full(len(keys), -1, np.int64)
    hit = known & (ordered[at] == wanted)
    return np.where(hit, index[at], -1).astype(np.int64)


def _missing_row(listed: HitList) -> int:
    """The row of the group without a value in a collapsed list, -1 when it has none."""
    column = listed.collapse
    assert column is not None
    if column.present is None:
        return -1
    rows = np.flatnonzero(~column.present)
    return int(rows[0]) if len(rows) else -1


def _shown_column(column: SortColumn, shard_index: int) -> SortColumn:
    """A column of a shard's list as the coordinator compares it: `_shard_doc` with the shard's
    index (the list numbers its one shard 0), keyword terms only those of these hits."""
    if column.kind == "shard_doc":
        return dataclasses.replace(column, values=column.values + (shard_index << 32))
    return _compact(column)


def _compact(column: SortColumn) -> SortColumn:
    """A keyword column with only the terms its rows use (a shard's global ordinals hold every
    term of its segments), in the same order."""
    terms = column.terms
    if column.kind != "keyword" or terms is None or not len(terms) or not len(column.values):
        return column
    values = column.values
    if column.present is not None:  # (a row without a value holds any ordinal)
        values = np.where(column.present, values, np.max(values[column.present], initial=0))
    used, inverse = np.unique(np.clip(values, 0, len(terms) - 1), return_inverse=True)
    return dataclasses.replace(column, values=inverse.astype(np.int64).reshape(-1), terms=terms[used])


# ---------------------------------------------------------------------------------------------
# the coordinator's side


class _Keys:
    """A set of collapse keys: values (keyword terms as bytes, or numbers; a set, as a page's few
    hundred keys are united and subtracted more cheaply hashed than sorted) and the group
    without a value."""

    def __init__(self, values: set[Any] | None = None, missing: bool = False) -> None:
        self.values = values if values is not None else set()
        self.missing = missing

    def __bool__(self) -> bool:
        return self.missing or bool(self.values)

    def __or__(self, other: _Keys) -> _Keys:
        return _Keys(self.values | other.values, self.missing or other.missing)

    def __sub__(self, other: _Keys) -> _Keys:
        return _Keys(self.values - other.values, self.missing and not other.missing)

    def array(self) -> np.ndarray | None:
        """The values, for a `CollapseAsk` (None: none)."""
        return np.array(list(self.values)) if self.values else None

    def holds(self, values: np.ndarray, present: np.ndarray) -> np.ndarray:
        """Per key (`values`, `present`: it has a value), whether it is in the set."""
        inside = ~present if self.missing else np.zeros(len(present), bool)
        if self.values and present.any():
            inside |= present & np.isin(values, np.array(list(self.values)))
        return inside


def _key_values(column: SortColumn) -> tuple[np.ndarray, np.ndarray]:
    """(each row's key, as bytes or a number; whether it has one)."""
    present = np.ones(len(column.values), bool) if column.present is None else column.present
    if column.kind != "keyword":
        return column.values, present
    terms = column.terms if column.terms is not None and len(column.terms) else np.array([b""])
    return terms[np.clip(column.values, 0, len(terms) - 1)], present


def _keys_of(column: SortColumn, rows: slice) -> _Keys:
    values, present = _key_values(column)
    values, present = values[rows], present[rows]
    return _Keys(set(values[present].tolist()), bool((~present).any()))


class _Rounds:
    """What the rounds of one collapsed page gathered from the shards."""

    def __init__(self, shards: int) -> None:
        self.parts: list[ShardTopDocs] = []
        self.taken = [0] * shards  # candidates received, per shard
        self.exhausted = [False] * shards
        self.last: list[int | None] = [None] * shards  # the doc of a shard's last candidate
        self.asked = [_Keys() for _ in range(shards)]  # keys a shard answered for
        self.candidates = _Keys()
        self.used = _Keys()  # keys with a hit at or before the cursor

    def take(self, answer: ShardTopDocs, checked: CollapseAsk | None) -> None:
        """Take a shard's answer (`checked`: the check it answered, None for candidates)."""
        found = answer.collapse
        assert found is not None
        i = answer.shard_index
        self.parts.append(answer)
        if found.candidates:
            self.taken[i] += found.candidates
            self.last[i] = int(answer.docs[found.candidates - 1])
            keys = _keys_of(found.keys, slice(0, found.candidates))
            self.asked[i] = self.asked[i] | keys
            self.candidates = self.candidates | keys
        if checked is None:
            self.exhausted[i] = found.exhausted
        else:
            shown = set() if checked.check is None else set(checked.check[found.used].tolist())
            self.used = self.used | _Keys(shown, found.missing_used)


def collapsed_page(
    services: SearchServices,
    targets: list[Target],
    request: SearchRequest,
    *,
    now_millis: int,
    aggs: bool,
    shards: Sequence[ShardSearch],
    contexts: Sequence[ShardContextId | None] | None,
) -> HitList:
    """The collapsed page [from, from + size) after the request's cursor, as a HitList of the page
    alone (`window`) with its keys (`HitList.collapse`), its totals those of every match. What
    the rounds bring is reserved on the request breaker before it is asked for (a 429 past it),
    and released with the answer."""
    guard = SearchGuard.for_search(services, request, None)
    try:
        return _collapsed_page(services, targets, request, now_millis, aggs, shards, contexts, guard)
    finally:
        guard.release_all()


def _collapsed_page(
    services: SearchServices,
    targets: list[Target],
    request: SearchRequest,
    now_millis: int,
    aggs: bool,
    shards: Sequence[ShardSearch],
    contexts: Sequence[ShardContextId | None] | None,
    guard: SearchGuard,
) -> HitList:
    from leafsearch.search.top_hits import _survivors, sort_field_types, sort_plan

    plan = sort_plan(request, targets)
    n = len(targets)
    pins = list(contexts) if contexts is not None else [None] * n
    need = request.from_ + request.size
    pool = services.shard_pool
    failures: list[ShardFailed] = []
    rounds = _Rounds(n)
    # What each hit a round brings costs the coordinator until the page is found: its doc, shard
    # and score, each sort value and its key, the collapse key; merged once more per round.
    hit_bytes = 2 * (MATCH_BYTES + SORT_KEY_BYTES * (len(plan.specs) + 1))

    def ask(asks: dict[int, CollapseAsk], with_aggs: bool = False) -> list[ShardTopDocs]:
        # (reserved before the answers arrive, for as many hits as asked for or checked)
        guard.reserve(
            hit_bytes * sum(a.count + (0 if a.check is None else len(a.check)) + 1 for a in asks.values())
        )
        queries = [
            ShardQuery(request, i, now_millis, plan, with_aggs, None, pins[i], n, collapse=a)
            for i, a in asks.items()
        ]
        answers = each_phase(pool, shards, "query", queries, catch=(ShardFailed,))
        found = _survivors(services, request, answers, failures, n)
        return found

    first = ask({i: CollapseAsk(0, FIRST_ROUND_FACTOR * need) for i in range(n)}, aggs)
    live = {a.shard_index for a in first}
    for answer in first:
        rounds.take(answer, None)
    while True:
        checks = {}
        for i in sorted(live):
            new = rounds.candidates - rounds.asked[i]
            if new:
                checks[i] = new
                rounds.asked[i] = rounds.asked[i] | new
        if checks:
            asked = {i: CollapseAsk(0, 0, k.array(), k.missing) for i, k in checks.items()}
            for answer in ask(asked):
                rounds.take(answer, asked[answer.shard_index])
        live -= {f.shard_index for f in failures}
        merged = _merge(targets, request, plan, rounds, sort_field_types)
        more = _more(merged, rounds, live, need) if need else None
        if more is None:
            break
        # (twice as many as each has given)
        extend = {i: CollapseAsk(rounds.taken[i], max(rounds.taken[i], need)) for i in more}
        for answer in ask(extend):
            rounds.take(answer, None)
        live -= {f.shard_index for f in failures}
    page = merged.page(rounds, live, request.from_, need)
    maxima = [a.max_score for a in first if a.max_score is not None]
    hits = HitList(
        targets,
        merged.target[page],
        merged.doc[page],
        None if merged.score is None else merged.score[page],
        [c.take(page) for c in merged.columns],
        [],
        sum(a.total for a in first),
        max(maxima, default=None),
        [p for a in first for p in a.agg_partials],
        terminated_early=any(a.terminated_early for a in first),
        window=True,
        timed_out=any(a.timed_out for a in first),
        failures=failures,
        collapse=merged.keys.take(page),
    )
    if contexts is not None:
        hits.contexts = pins
    return hits


@dataclasses.dataclass
class _Merged:
    """Every hit the rounds returned, once each, in sort order (ties by shard, then doc)."""

    target: np.ndarray
    doc: np.ndarray
    score: np.ndarray | None
    columns: list[SortColumn]
    keys: SortColumn
    firsts: np.ndarray  # positions of each key's best hit, keys shown before the cursor left out

    def position(self, shard: int, doc: int) -> int:
        return int(np.flatnonzero((self.target == shard) & (self.doc == doc))[0])

    def bound(self, rounds: _Rounds, live: set[int]) -> int:
        """The position up to which every key's best hit is known: the first last candidate of
        the shards that have more (the end when none has)."""
        bounds = [
            self.position(i, last)
            for i in live
            if not rounds.exhausted[i] and (last := rounds.last[i]) is not None
        ]
        return min(bounds, default=len(self.doc))

    def page(self, rounds: _Rounds, live: set[int], start: int, end: int) -> np.ndarray:
        known = self.firsts[self.firsts <= self.bound(rounds, live)]
        return known[start:end]


def _merge(
    targets: list[Target], request: SearchRequest, plan: SortPlan, rounds: _Rounds, field_types: Any
) -> _Merged:
    parts = rounds.parts
    shard_of = [np.full(len(p.docs), p.shard_index, np.int32) for p in parts]
    target = np.concatenate(shard_of or [np.empty(0, np.int32)])
    doc = np.concatenate([p.docs for p in parts] or [np.empty(0, np.int64)])
    scored = [p.scores for p in parts if p.scores is not None]
    score = np.concatenate(scored) if scored and len(scored) == len(parts) else None
    columns = [
        merge_columns(spec, kind, [p.columns[j] for p in parts], field_types(spec, targets))
        for j, (spec, (kind, _)) in enumerate(zip(plan.specs, plan.resolved, strict=True))
    ]
    field = request.collapse.field  # type: ignore[union-attr]
    key_spec = SortSpec(field, "asc")
    key_parts = [p.collapse.keys for p in parts if p.collapse is not None]
    key_kind = key_parts[0].kind if key_parts else "keyword"
    keys = merge_columns(key_spec, key_kind, key_parts, field_types(key_spec, targets))
    # once each (a shard may return a hit as a candidate and as a checked key's), in sort order
    _, once = np.unique((target.astype(np.int64) << 40) | doc, return_index=True)
    order_keys = [k[once] for c in columns for k in c.key_columns()]
    order = once[np.lexsort([doc[once], target[once], *order_keys[::-1]])]
    target, doc = target[order], doc[order]
    score = None if score is None else score[order]
    columns = [c.take(order) for c in columns]
    keys = keys.take(order)
    return _Merged(target, doc, score, columns, keys, _firsts(keys, rounds.used))


def _firsts(keys: SortColumn, used: _Keys) -> np.ndarray:
    """The positions of each key's first hit in sort order, keys in `used` left out."""
    values, present = _key_values(keys)
    shown = used.holds(values, present)
    first = np.zeros(len(values), bool)
    with_value = np.flatnonzero(present & ~shown)
    _, firsts = np.unique(values[with_value], return_index=True)
    first[with_value[firsts]] = True
    without = np.flatnonzero(~present & ~shown)
    if len(without):
        first[without[0]] = True
    return np.flatnonzero(first)


def _more(merged: _Merged, rounds: _Rounds, live: set[int], need: int) -> list[int] | None:
    """The shards to ask for more candidates, or None when the page is known: it ends at or before
    the bound (`_Merged.bound`). Asked: the shards whose last candidate comes before the page's end
    as known so far (among them the one that sets the bound)."""
    bound = merged.bound(rounds, live)
    if bound >= len(merged.doc) or np.count_nonzero(merged.firsts <= bound) >= need:
        return None
    end = int(merged.firsts[need - 1]) if len(merged.firsts) >= need else len(merged.doc)
    return [
        i
        for i in sorted(live)
        if not rounds.exhausted[i] and (last := rounds.last[i]) is not None and merged.position(i, last) < end
    ]
