"""The state-free part of a large bulk request, done in a search worker process.

Why: the server process runs one thread of Python at a time, and with one `_bulk` client it is
already busy most of the time, so concurrent bulk clients could not index faster than one.
Splitting the body into operations (`bulk_request.parse_bulk`) and parsing the documents of an
index together (`mapping_batch.parse_batch`: JSON, mapping lookups, analysis) need nothing but
the body and a mapping, and they are about half of what a bulk request costs the server process.
Done in the search workers (idle while indexing), they run on the other core while the server
process applies another request's operations.

What stays in the server process: which index an item reaches (aliases, auto-create,
authorization), ids, versions, seq_nos, dynamic mapping updates (in request order, under the
node's indexing slot, as always), the translog and the buffer. A worker's batch is used only if
the index's mapping is still at the version the worker parsed against (its `IndexState` carries
it); otherwise, and whenever a batch does not parse (new fields, arrays, bad values ...), the
server process parses as it always did, so items, mappings and errors are the same either way.
A malformed body fails in the worker with the very error `parse_bulk` raises here. A worker that
dies, or none being ready, only means the server process does the work itself: nothing was
changed yet. `--search-workers 0` and small bodies take the in-process path alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from leafsearch.errors import ElasticError
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.parsed import ParsedBatch
from leafsearch.indices.aliases import write_target
from leafsearch.request.search_types import SourceFilter
from leafsearch.search.workers.pool import WorkerUnavailable
from leafsearch.write.bulk_columns import SimpleBulk, parse_simple
from leafsearch.write.bulk_request import BulkOp, parse_bulk

if TYPE_CHECKING:
    from leafsearch.index.index import Index
    from leafsearch.index.mapping import Mapping
    from leafsearch.search.workers.mirror import Mirror
    from leafsearch.write.services import WriteServices

#: The cluster setting below which a body is parsed in the server process: the round trips to
#: a worker would cost more than they save (default 64kb, about 300 log lines). An index's
#: documents in a larger body are parsed in a worker when their sources are at least half that.
MIN_SIZE_SETTING = "indices.bulk.worker_parse_min_size"
#: ... and the percent of a core that must have idled lately (idle_cpu.py): the moved work costs
#: more CPU in all, so on busy cores it would only take CPU from other processes.
MIN_IDLE_SETTING = "indices.bulk.worker_parse_min_idle_cpu"


@dataclass(frozen=True, slots=True)
class SplitJob:
    """A bulk body to split into operations (`parse_bulk`, in a worker)."""

    body: bytes
    default_index: str | None
    default_routing: str | None
    default_source: SourceFilter | None

    def bind(self, mirror: Mirror) -> Callable[[], PackedOps]:
        return partial(_split, self.body, self.default_index, self.default_routing, self.default_source)


#: Operations as they cross back: one list per `BulkOp` field, in field order.
PackedOps = tuple[list[Any], ...]


def _split(
    body: bytes, default_index: str | None, default_routing: str | None, default_source: SourceFilter | None
) -> PackedOps:
    """`parse_bulk`, its operations packed field by field with their kinds and index names shared:
    thousands of objects pickled one by one cost both processes about twice as much."""
    ops = parse_bulk(body, default_index, default_routing, default_source)
    shared: dict[str, str] = {}
    share = shared.setdefault
    return (
        [share(op.kind, op.kind) for op in ops],
        [op.meta for op in ops],
        [op.line for op in ops],
        [share(op.index, op.index) for op in ops],
        [op.routing for op in ops],
        [op.source for op in ops],
        [op.external for op in ops],
        [op.wanted for op in ops],
    )


@dataclass(frozen=True, slots=True)
class ParseJob:
    """The sources of one index's index/create operations, to parse together against the
    mapping the worker holds for it; answered as (that mapping's version, the batch or None)."""

    index_uuid: str
    sources: list[bytes]

    def bind(self, mirror: Mirror) -> Callable[[], tuple[int, ParsedBatch | None]]:
        index = mirror.indices[self.index_uuid]  # taken now: a later update does not change it
        return partial(_parse, index.mapping, index.mapping_version, self.sources)


def _parse(mapping: Mapping, version: int, sources: list[bytes]) -> tuple[int, ParsedBatch | None]:
    batch = parse_batch(mapping, sources)
    if batch is not None:
        batch.sources = []  # the server process has them
        _share_strings(batch)
    return version, batch


def _share_strings(batch: ParsedBatch) -> None:
    """One string object per distinct keyword: pickle writes each once and refers to it after,
    so the server process unpickles a batch of log lines faster (and its buffer holds one object
    per term, not per occurrence). Texts are not analysed yet (`ParsedBatch`)."""
    shared = {}
    share = shared.setdefault
    for path, (rows, values) in batch.keyword.items():
        batch.keyword[path] = (rows, list(map(share, values, values)))


@dataclass(slots=True)
class PreparedBatch:
    """One index's documents parsed in a worker: usable while the mapping is at `version`."""

    version: int
    batch: ParsedBatch
    row_of: dict[int, int]  # position of the operation in the request -> row of the batch


@dataclass(slots=True)
class Prepared:
    """A bulk request's operations split in a worker, and the batches parsed there, by index uuid."""

    ops: Sequence[BulkOp]  # a `SimpleBulk` when its lines are all simple
    batches: dict[str, PreparedBatch]


def prepare(
    services: WriteServices,
    body: bytes,
    default_index: str | None,
    default_routing: str | None,
    default_source: SourceFilter | None,
    require_alias: bool,
) -> Prepared | None:
    """Split and parse a bulk body in the search workers while another request holds the node's
    indexing slot; None when the slot is free, the body small or no worker took it (the caller
    parses it itself, in the slot).

    Why only then: a request that finds the slot free is served soonest by parsing at once in
    this process (a worker's round trips and the results' unpickling only add to its time); one
    that would wait for the slot parses in a worker meanwhile, on the other core, if a core has
    had time to spare lately (`indices.bulk.worker_parse_min_idle_cpu`)."""
    pool = services.search.workers
    if pool is None or not services.indexing.locked():
        return None
    min_size = services.cluster_settings.get(MIN_SIZE_SETTING)
    if len(body) < min_size or not _spare_cpu(services):
        return None
    ops: Sequence[BulkOp] | None = parse_simple(body, default_index, default_routing)
    if ops is None:  # not a body of simple lines, which splits here faster than a round trip
        try:
            packed = pool.run_job(SplitJob(body, default_index, default_routing, default_source))
        except WorkerUnavailable:
            return None
        ops = list(map(BulkOp, *packed))
    batches: dict[str, PreparedBatch] = {}
    for index, positions in _documents_by_index(services, ops, require_alias):
        sources = _sources(ops, positions)
        if sum(map(len, sources)) < min_size // 2:
            continue
        try:
            version, batch = pool.run_job(ParseJob(index.uuid, sources), [index])  # type: ignore[arg-type]
        except WorkerUnavailable:
            continue
        if batch is not None:
            batch.sources = sources
            batches[index.uuid] = PreparedBatch(
                version, batch, {pos: row for row, pos in enumerate(positions)}
            )
    return Prepared(ops, batches)


def _sources(ops: Sequence[BulkOp], positions: list[int]) -> list[bytes]:
    if isinstance(ops, SimpleBulk):
        return [ops.sources[pos] for pos in positions]
    return [ops[pos].source for pos in positions]  # type: ignore[misc]


def _spare_cpu(services: WriteServices) -> bool:
    """Whether the machine had the idle CPU the setting asks for (unknown: yes)."""
    wanted = services.cluster_settings.get(MIN_IDLE_SETTING) / 100
    if wanted <= 0:
        return True
    idle = services.idle_cpu.idle_cores()
    return idle is None or idle >= wanted


def _documents_by_index(
    services: WriteServices, ops: Sequence[BulkOp], require_alias: bool
) -> list[tuple[Index, list[int]]]:
    """The positions of the index/create operations per existing open index they name (through
    aliases), as the indexing slot will most likely find them; what it finds otherwise (an alias
    moved, an index created meanwhile) is parsed there."""
    if isinstance(ops, SimpleBulk):
        named = [((name, require_alias), positions) for name, positions in ops.by_name().items()]
    else:
        by_name: dict[tuple[str, bool], list[int]] = {}
        for pos, op in enumerate(ops):
            if op.kind in ("index", "create"):
                key = (op.index, bool(op.meta.get("require_alias", require_alias)))
                by_name.setdefault(key, []).append(pos)
        named = list(by_name.items())
    groups: dict[str, tuple[Index, list[int]]] = {}
    for (name, required), positions in named:
        try:
            concrete, _ = write_target(services.aliases.resolving, name, None, require_alias=required)
        except ElasticError:
            continue
        index = services.indices.get(concrete)
        if index is not None and not index.closed:
            groups.setdefault(index.uuid, (index, []))[1].extend(positions)
    return [(index, sorted(positions)) for index, positions in groups.values()]
