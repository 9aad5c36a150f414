"""The shard interface: what the coordinator asks of a shard, and what comes back, as data.

As Elasticsearch's coordinator talks to shards (ShardSearchRequest / QuerySearchResult,
ShardFetchSearchRequest / FetchSearchResult, DfsSearchResult, ReaderContexts named by
ShardSearchContextId), the coordinator here reaches every shard through `ShardSearch`:

- `open_context(name)` -> `ShardContextId`: the shard pins its current snapshot (a PIT, a
  scroll; with a name, on disk too, so a restart restores it); `free_context(id)` releases it.
  Later messages name the pin in their `context`.
- `dfs(ShardDfs)` -> `DfsStats`: the term statistics the shard's query reads
  (`dfs_query_then_fetch`); the coordinator sums them (`DfsStats.total`) into every `ShardQuery`.
- `query(ShardQuery)` -> `ShardTopDocs`: the shard's best `from + size` hits with their sort values,
  totals and aggregation partials; the coordinator merges them (top_hits.py).
- `fetch(ShardFetch)` -> `ShardFetchResult`: the shard's hits of the page, rendered as JSON bytes
  (or dicts); the coordinator splices them in page order (fetch_phase.py).
- `suggest(ShardSuggest)` -> a list per suggestion of the shard's part: its best completion
  options (rendered) or its term statistics; the coordinator merges them (search/suggest.py).
- a collapsed page's rounds are queries too (`ShardQuery.collapse`, a `CollapseAsk`): the shard's
  groups after the cursor, or its best hits of given keys (`ShardTopDocs.collapse`;
  collapse_shards.py).
- a search that asks one shard sends no fetch: its `ShardQuery.fetch` (`FetchAlong`) has the
  shard fetch the page with its query, in the same answer (`ShardTopDocs.page`;
  query_and_fetch.py); a small one-shot page of several shard actors has each render its
  candidates with its query (`FetchAlong.candidates`).

Everything that crosses it is data: the typed `SearchRequest`, numbers, strings, numpy arrays and
rendered JSON (no Segment, Searcher or open file), so a shard served by another process or machine
implements the same methods and the coordinator does not change (the tests search through a shard
that pickles every message). `top_hits.LocalShard` is the in-process implementation; the
coordinator runs the shards of a phase at once (`each_phase`): local ones on the Node's shard
pool, remote ones (`SendsPhases`) all sent before any is waited for.

What the coordinator decides for all shards together travels in the request: the kind every sort
compares in (a field mapped `long` in one index and `double` in another compares as `double` in
both) and the field type that reads `missing` and cursor values. What a shard returns is
mergeable without its segments: sort values as numbers, keyword values as the shard's own sorted
terms with ordinals into them (`merge_columns` unites the term lists).

Not yet behind the interface: the coordinator holds `Target`s (mappings and index names; in-process
also the Searchers, which a message without a context reads), scroll batches and cached PIT walks
page a HitList over all their shards (the in-process walk cache), and rescoring under DFS reads
every shard's segments.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, Protocol, TypeVar

import numpy as np

from leafsearch.common.wire_pickle import ByFields
from leafsearch.request.search_types import SearchRequest, SortSpec
from leafsearch.search.dfs import DfsStats
from leafsearch.search.profile import ShardProfile
from leafsearch.search.sort_keys import SortColumn

R = TypeVar("R")

#: How a shard's fetch answers (see `ShardFetch.form`).
FetchForm = Literal["page", "hits", "dicts"]


@dataclass(frozen=True, slots=True)
class SortPlan(ByFields):
    """A search's sort as every shard must execute it."""

    specs: tuple[SortSpec, ...]
    #: Per spec: the kind it compares in over all the request's shards, and the field type (the
    #: first mapped one) that parses its `missing` and `search_after` values; (kind, None) for
    #: `_score`, `_doc` and `_shard_doc`.
    resolved: tuple[tuple[str, Any], ...]
    #: Whether every shard compares each sort in that same kind, so that a segment's stored sort
    #: order serves (else a shard sorts its matches).
    uniform: bool


@dataclass(frozen=True, slots=True)
class ShardContextId(ByFields):
    """A reader context of one shard: the snapshot it pinned at `ShardSearch.open_context`, until
    `free_context` (Elasticsearch's ShardSearchContextId). `session` names the shard service's
    process life, so an id from before a restart is unknown rather than mistaken for a new one."""

    session: str
    number: int
    #: What the pinned snapshot holds (documents, deleted ones included, and segments): the
    #: coordinator's listings (`_cat/search_contexts`) of a context whose snapshot is in a shard
    #: actor read them here. Not part of the id.
    docs: int = field(default=0, compare=False)
    segments: int = field(default=0, compare=False)
    #: The name the shard keeps the pinned snapshot on disk under (index/pins.py), so that it
    #: survives a restart; None: held in memory only (a by-query operation's, a shard actor's).
    name: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class ShardQuery(ByFields):
    """One shard's part of a search's query phase."""

    request: SearchRequest
    shard_index: int  # the shard's position in the request (ties, `_shard_doc`)
    now_millis: int  # `now` of every shard of the search
    sort: SortPlan
    aggs: bool  # collect the request's aggregations
    #: Term statistics of every shard of the request summed (`dfs_query_then_fetch`).
    dfs_stats: DfsStats | None = None
    #: The pinned snapshot to search; None: the snapshot the shard handle was resolved to.
    context: ShardContextId | None = None
    #: How many shards the request reads (a slice goes to shards first); None: slices partition
    #: this shard as if it were the only one.
    shard_count: int | None = None
    #: The page's fetch, to run with the query in the same call (the search asks this shard
    #: alone: Elasticsearch's query-and-fetch); None: the coordinator sends a `ShardFetch` later.
    fetch: FetchAlong | None = None
    #: A PIT slice without a field over shards whose live documents the coordinator counted:
    #: the positions [start, end) of this shard's live documents in the slice
    #: (`slicing.pit_slice_windows`); None: the slice goes to shards first (`shard_count`).
    slice_window: tuple[int, int] | None = None
    #: A collapsed search's round on this shard (collapse_shards.py); None: plain top hits.
    collapse: CollapseAsk | None = None


@dataclass(frozen=True, slots=True)
class CollapseAsk:
    """One round of a collapsed page on a shard (collapse_shards.py): of the shard's groups whose
    best hit comes after the cursor, in sort order, `count` after the first `skip`; and for the
    `check` keys (keyword terms as bytes, or numbers; `check_missing`: the group without a
    value), the best hit of each group after the cursor, or whether one comes at or before it."""

    skip: int
    count: int
    check: np.ndarray | None = None
    check_missing: bool = False


@dataclass(slots=True)
class CollapseFound:
    """A shard's answer to a `CollapseAsk`, beside its `ShardTopDocs` hits: the first
    `candidates` hits are the groups asked for, the others the best hits of checked groups after
    the cursor; `keys` the collapse key of each hit; `exhausted`: no group after the last
    candidate; `used`: the positions in `check` of the groups with a hit at or before the cursor
    (`missing_used`: the group without a value)."""

    keys: SortColumn
    candidates: int
    exhausted: bool
    used: np.ndarray
    missing_used: bool = False


@dataclass(frozen=True, slots=True)
class FetchAlong(ByFields):
    """What a shard needs, beyond its `ShardQuery`, to fetch the page the coordinator would ask
    of it after merging its answer alone (query_and_fetch.py): the same `ShardFetch`, built by
    the same function from the same hit list. The caller gives `raw` and `last_phase`; top_hits
    the rest, for the one shard it asks."""

    raw: bool  # the page is wanted as JSON bytes (`render_hits`' `raw`)
    last_phase: bool  # see `ShardFetch.last_phase`
    #: The request the page renders with when it is not the query's (a scroll's own, whose
    #: batches query a `search_after` walk: walks.py); None: the query's.
    request: SearchRequest | None = None
    #: The sort columns the page shows when fewer than the query sorts by (a scroll's
    #: `_shard_doc` tiebreaker is the walk's); None: all.
    shown: int | None = None
    #: The coordinator's hit list holds this many targets (the request's shards).
    targets: int = 0
    #: Per sort spec, the field type in each target (the coordinator's mappings': they render
    #: the sort values; `()` for `_score`, `_doc`, `_shard_doc`).
    field_types: tuple[tuple[Any, ...], ...] = ()
    #: The search asks several shards: the shard renders every hit of its answer (form "hits"),
    #: the candidates of which the coordinator's page takes its own (query_and_fetch.py).
    candidates: bool = False


@dataclass(slots=True)
class ShardTopDocs(ByFields):
    """A shard's best `from + size` hits in sort order (ties by doc), and what it counted."""

    shard_index: int
    total: int
    max_score: float | None
    docs: np.ndarray  # int64 shard-level doc numbers
    scores: np.ndarray | None  # float32, when the search needs scores
    columns: list[SortColumn]  # the hits' sort values, one column per sort spec
    agg_partials: list = field(default_factory=list)
    timed_out: bool = False
    profile: ShardProfile | None = None  # when the search is profiled
    #: The page fetched with the query (`ShardQuery.fetch`), else None.
    page: FetchedPage | None = None
    #: `terminate_after` stopped the shard's collection before its last match.
    terminated_early: bool = False
    #: A collapsed round's groups (`ShardQuery.collapse`), else None.
    collapse: CollapseFound | None = None


@dataclass(frozen=True, slots=True)
class ShardFetch(ByFields):
    """One shard's hits of a page to render (Elasticsearch's ShardFetchSearchRequest), in page
    order, with what the coordinator knows of them from the merge."""

    request: SearchRequest  # its fetch options: `_source`, `fields`, `docvalue_fields`, `version`...
    shard_index: int
    docs: np.ndarray  # int64 shard-level doc numbers, in page order
    scores: np.ndarray | None  # float32 per hit when the page shows scores, else None (`null`)
    sort_values: list[list[Any]] | None  # per sort column, the hits' values as rendered
    #: How the hits come back: "page", one bytes of JSON objects each followed by a comma (the
    #: page is this shard's alone); "hits", those bytes per hit (the coordinator interleaves them
    #: with other shards'); "dicts", one dict per hit (options that rewrite a hit, in-process
    #: callers).
    form: FetchForm
    context: ShardContextId | None = None
    #: The search's last phase on this shard (a one-shot search's page, not a PIT's, a scroll's
    #: or a by-query batch): a shard may free, as it answers, the snapshot the search pinned on
    #: it without a context of its own (Elasticsearch's fetch frees a single-session reader
    #: context), which saves a release message per shard.
    last_phase: bool = False
    #: Each hit as a line of an export (`_export`, export.py): no `_score`, `_source` filtered
    #: here, each object followed by a newline instead of a comma (forms "page" and "hits").
    lines: bool = False


@dataclass(slots=True)
class ShardFetchResult(ByFields):
    """A shard's rendered hits (Elasticsearch's FetchSearchResult), in the order asked."""

    shard_index: int
    page: bytes | None  # form "page": a JSON array of the hits (of lines, their NDJSON)
    hits: list[Any] | None  # form "hits" (bytes) or "dicts"
    fetch_nanos: int  # the shard's time rendering them (the profile's fetch time)


@dataclass(slots=True)
class FetchedPage(ByFields):
    """The fetch a shard ran with its query (`ShardQuery.fetch`): the page's range in the hit
    list it built, and the fetch's answer, or the error the fetch met (raised where the
    coordinator's fetch would have raised it, so it is reported as a fetch failure)."""

    start: int
    end: int
    form: FetchForm
    result: ShardFetchResult | None
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class ShardDfs:
    """The DFS phase of `dfs_query_then_fetch` on one shard: the term statistics its query reads."""

    request: SearchRequest
    shard_index: int
    now_millis: int
    context: ShardContextId | None = None


@dataclass(frozen=True, slots=True)
class ShardSuggest:
    """A search's `suggest` section on one shard: each suggestion's part from the shard's snapshot
    (search/suggest.py `shard_suggestions`)."""

    request: SearchRequest
    shard_index: int
    context: ShardContextId | None = None


class ShardSearch(Protocol):
    """What the coordinator needs of a shard: reader contexts, DFS, query and fetch phases.

    Every argument and answer is plain data that pickles, so the shard may be in another process."""

    def open_context(self, name: str | None = None) -> ShardContextId:
        """Pin the shard's current snapshot until `free_context`; later phases name it. `name`:
        also keep it on disk under that name, so that a restart restores it (`ShardContextId.name`)."""
        ...

    def free_context(self, context: ShardContextId) -> bool:
        """Release a pin; False when it was not open (freed already, or unknown)."""
        ...

    def dfs(self, request: ShardDfs) -> DfsStats: ...

    def query(self, query: ShardQuery) -> ShardTopDocs: ...

    def fetch(self, fetch: ShardFetch) -> ShardFetchResult: ...

    def suggest(self, message: ShardSuggest) -> list[Any]: ...


class SendsPhases(Protocol):
    """A shard that sends a phase and is waited for later (a shard on a Ray machine actor:
    ray_backend/remote.py), so a coordinator sends every message of a phase before waiting for
    any, with no thread per shard: a thread each cost the coordinator more CPU than the calls
    themselves. Shards of one `route` (a machine) are sent a phase's messages in one call; a
    phase's messages to every route go to one `send_all`, which pickles what they share once."""

    route: Hashable

    def send_all(self, phase: str, sends: list[tuple[Any, Any]]) -> list[Callable[[], Any]]:
        """Send `phase` ("dfs", "query", "fetch" or "suggest") to each (shard, message) of `sends`,
        one call per route; per message the function that waits for its answer (and raises the
        phase's error)."""
        ...

    def call_all(self, method: str, calls: list[tuple[Any, tuple]]) -> list[Callable[[], Any]]:
        """`each_call`'s calls of shards of this one's route, sent in one call."""
        ...


def each_phase(
    pool: Executor | None,
    shards: Sequence[ShardSearch],
    phase: str,
    messages: Sequence[Any],
    catch: tuple[type[Exception], ...] = (),
) -> list[Any]:
    """`phase` ("dfs", "query", "fetch") of each message on its shard (`shards[m.shard_index]`),
    answers in the messages' order; an error of a `catch` type is answered instead of raised.
    Shards that send (`SendsPhases`) are all sent first (one `send_all`: a call per route), then
    the others run (`each_shard`), then the sent ones are waited for, so remote and local shards
    of one search overlap."""

    def caught(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except catch as exc:
            return exc

    sent: dict[int, Callable[[], Any]] = {}
    answers: list[Any] = [None] * len(messages)
    routed = [getattr(shards[m.shard_index], "route", None) is not None for m in messages]
    positions = [i for i, sends in enumerate(routed) if sends]
    if positions:
        sends = [(shards[messages[i].shard_index], messages[i]) for i in positions]
        waits = caught(sends[0][0].send_all, phase, sends)
        for j, i in enumerate(positions):
            if isinstance(waits, Exception):
                answers[i] = waits
            else:
                sent[i] = waits[j]
    here = [i for i in range(len(messages)) if i not in sent and answers[i] is None]
    calls = [(lambda m: caught(getattr(shards[m.shard_index], phase), m), messages[i]) for i in here]
    error: Exception | None = None
    try:
        for i, answer in zip(here, each_shard(pool, calls), strict=True):
            answers[i] = answer
    except Exception as exc:
        error = exc
    for i, wait in sent.items():  # every one, even after an error: each answer may pin a context
        try:
            answers[i] = caught(wait)
        except Exception as exc:
            error = error or exc
    if error is not None:
        raise error
    return answers


def each_call(shards: Sequence[Any], method: str, args: Sequence[tuple]) -> list[Callable[[], Any]]:
    """`method` ("open_context", "free_context") of each shard with its arguments; per shard the
    function that answers it. Shards with a `route` are all sent at once, one call per route
    (`call_all`), so waiting for the first finds the others under way; the others run as they
    are waited for."""
    waits: list[Callable[[], Any]] = [None] * len(shards)  # type: ignore[list-item]
    routes: dict[Hashable, list[int]] = {}
    for i, shard in enumerate(shards):
        route = getattr(shard, "route", None)
        if route is None:
            waits[i] = partial(getattr(shard, method), *args[i])
        else:
            routes.setdefault(route, []).append(i)
    for positions in routes.values():
        sent = shards[positions[0]].call_all(method, [(shards[i], args[i]) for i in positions])
        for i, wait in zip(positions, sent, strict=True):
            waits[i] = wait
    return waits


def each_shard(pool: Executor | None, calls: list[tuple[Callable[[Any], R], Any]]) -> list[R]:
    """`method(message)` of each call, at once on `pool` when there are several (each in a copy of
    the caller's context: its identity, for the log), in the calls' order."""
    if len(calls) == 1 or pool is None:
        return [method(message) for method, message in calls]
    futures = [pool.submit(contextvars.copy_context().run, method, message) for method, message in calls]
    return [future.result() for future in futures]


def merge_columns(spec: SortSpec, kind: str, columns: list[SortColumn], field_types: tuple) -> SortColumn:
    """One column over the hits of several shards (concatenated in shard order; none when the
    search has no shard). Keyword values are re-numbered into the union of the shards' term lists;
    `field_types` are the sort field's type in every target of the request, for rendering."""
    if not columns:
        dtype = np.float64 if kind in ("double", "score") else np.int64
        terms = np.empty(0, "S1") if kind == "keyword" else None
        return SortColumn(spec, kind, np.empty(0, dtype), None, terms, field_types)
    first = columns[0]
    presents = [c.present for c in columns]
    present = (
        None
        if all(p is None for p in presents)
        else np.concatenate(
            [np.ones(len(c.values), bool) if p is None else p for c, p in zip(columns, presents, strict=True)]
        )
    )
    if first.kind != "keyword":
        values = np.concatenate([c.values for c in columns])
        terms = None
    else:
        term_lists = [c.terms if c.terms is not None else np.empty(0, "S1") for c in columns]
        terms, inverse = np.unique(np.concatenate(term_lists), return_inverse=True)
        remapped, offset = [], 0
        for column, own in zip(columns, term_lists, strict=True):
            mapping = inverse[offset : offset + len(own)].astype(np.int64)
            offset += len(own)
            remapped.append(mapping[column.values] if len(own) else np.zeros(len(column.values), np.int64))
        values = np.concatenate(remapped)
    return SortColumn(first.spec, first.kind, values, present, terms, field_types, first.missing_key)
