"""The shard side of a write: already-parsed operations in, per-operation outcomes out, as data.

As Elasticsearch's coordinator sends a BulkShardRequest to a primary shard, the write path is cut
in two. The coordinator (documents.py) resolves the index, routes each operation to its shard,
checks what the request alone decides (id, required routing) and parses the documents against
the mapping it owns (dynamic mapping updates are decided there, before anything is logged). The
shard then applies a `ShardWrite`: the version checks (`if_seq_no`, `op_type: create`, external
versions) against its version map and segments, seq_no assignment, the buffer and the translog,
in operation order, so an operation sees the ones before it on the same id.

`ShardWrite` and `ShardWriteOutcome` pickle (`ElasticError`s included), so the same function
serves a shard of this process (documents.py, under `Shard.writing()`, the fsync shared later)
and a shard in another process or machine (a Ray shard actor applies it and answers after the
translog fsync). Cost: O(operations), one `Shard.prefetch` of every id first.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal

from leafsearch.errors import ElasticError, VersionConflict
from leafsearch.index.parsed import ParsedBatch, ParsedDoc
from leafsearch.index.shard import PRIMARY_TERM, DocState, Shard
from leafsearch.index.translog import OP_INDEX, decode_records, encode_index_ops
from leafsearch.index.versioning import ExternalVersion, VersionRefused

#: "index" overwrites; "create" refuses an existing document; "delete".
WriteKind = Literal["index", "create", "delete"]


@dataclass(frozen=True, slots=True)
class WriteOp:
    """One operation of a `ShardWrite`, checked and parsed by the coordinator."""

    kind: WriteKind
    doc_id: str
    routing: str | None = None
    if_seq_no: int | None = None
    if_primary_term: int | None = None
    external: ExternalVersion | None = None
    #: The id was generated (never seen: no lookup, no conflict possible).
    auto_id: bool = False
    #: index/create: the parsed document, or its row in `ShardWrite.batch`.
    parsed: ParsedDoc | None = None
    row: int | None = None


@dataclass(frozen=True, slots=True)
class IndexColumns:
    """Index/create operations without `if_seq_no` or an external version, by column: operation
    i indexes `ids[i]` with the document at `rows[i]` of `ShardWrite.batch`. The common bulk
    (a run of plain writes) needs no `WriteOp`, `DocState` or outcome object per document."""

    ids: list[str]
    routings: list[str | None]
    #: Refuses an existing document (`op_type: create`).
    creates: list[bool]
    #: The id was generated (never seen: no lookup, no conflict possible).
    auto_ids: list[bool]
    rows: list[int]


@dataclass(frozen=True, slots=True)
class ShardWrite:
    """Operations for one shard, applied in order (Elasticsearch's BulkShardRequest)."""

    index_name: str
    index_uuid: str
    shard_id: int
    ops: tuple[WriteOp, ...]
    #: index/create documents parsed together (`Mapping.parse_batch`), which ops name by `row`:
    #: their values join the buffer column by column.
    batch: ParsedBatch | None = None
    #: Instead of `ops`: plain index/create operations of `batch`, by column.
    columns: IndexColumns | None = None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What an applied operation did (Elasticsearch's DocWriteResponse, less the request's part)."""

    result: Literal["created", "updated", "deleted", "not_found"]
    version: int
    seq_no: int
    term: int = PRIMARY_TERM  # (the shard's primary term)


@dataclass(slots=True)
class ColumnOutcomes(Sequence):
    """The outcomes of `IndexColumns`' operations, by column: operation i has `versions[i]` and
    `seq_nos[i]` unless `refused` holds its error; it updated a document if i is in `updated`,
    else created one."""

    versions: list[int]
    seq_nos: list[int]
    updated: set[int] = field(default_factory=set)
    refused: dict[int, ElasticError] = field(default_factory=dict)
    term: int = PRIMARY_TERM  # (the shard's primary term)

    def __len__(self) -> int:
        return len(self.versions)

    def __getitem__(self, i):  # type: ignore[override]
        refused = self.refused.get(i)
        if refused is not None:
            return refused
        result = "updated" if i in self.updated else "created"
        return WriteOutcome(result, self.versions[i], self.seq_nos[i], self.term)

    def __iter__(self) -> Iterator[WriteOutcome | ElasticError]:
        return (self[i] for i in range(len(self)))


#: Per operation of a `ShardWrite`, in order: its outcome, or the refusal that left it unapplied.
ShardWriteOutcome = list[WriteOutcome | ElasticError] | ColumnOutcomes


def apply_write(shard: Shard, write: ShardWrite) -> ShardWriteOutcome:
    """Apply `write` to `shard`, whose `writing()` the caller holds; the caller syncs the point
    before acknowledging any of it."""
    if write.columns is not None:
        return index_columns(shard, write)
    shard.prefetch([op.doc_id for op in write.ops if not op.auto_id])
    outcomes: ShardWriteOutcome = []
    if write.batch is not None:
        with shard.index_batch(write.batch) as batch:
            for op in write.ops:
                try:
                    prior, version = index_checks(write, shard, op)
                    assert op.row is not None
                    seq_no = batch.index(op.row, op.doc_id, op.routing, prior, version)
                except ElasticError as exc:
                    outcomes.append(exc)
                    continue
                result = "updated" if exists(prior) else "created"
                outcomes.append(WriteOutcome(result, version, seq_no, shard.primary_term))
        return outcomes
    for op in write.ops:
        try:
            outcomes.append(_apply_one(shard, write, op))
        except ElasticError as exc:
            outcomes.append(exc)
    return outcomes


def index_columns(shard: Shard, write: ShardWrite) -> ShardWriteOutcome:
    """Apply `write.columns`, in the order and with the checks of the same `WriteOp`s, in steps
    over the whole run: the prior state of every id (version map, tombstones, then one lookup per
    segment), the few that exist checked and versioned one by one, then seq_nos, one translog
    record, the version map and the buffer for all. An id twice in the run goes the per-operation
    way (the second write must see the first)."""
    columns, batch = write.columns, write.batch
    assert columns is not None and batch is not None
    ids, auto_ids = columns.ids, columns.auto_ids
    n = len(ids)
    if len(set(ids)) != n:
        ops = tuple(
            WriteOp("create" if create else "index", doc_id, routing, None, None, None, auto, None, row)
            for doc_id, routing, create, auto, row in zip(
                ids, columns.routings, columns.creates, auto_ids, columns.rows, strict=True
            )
        )
        return apply_write(shard, ShardWrite(write.index_name, write.index_uuid, write.shard_id, ops, batch))
    started = time.perf_counter_ns()
    priors = _priors(shard, ids, auto_ids)
    versions = [1] * n
    outcomes = ColumnOutcomes(versions, [], term=shard.primary_term)
    for i in [i for i, prior in enumerate(priors) if prior is not None]:
        prior = priors[i]
        try:
            if columns.creates[i] and exists(prior):
                raise _exists(write, shard, ids[i], prior)  # type: ignore[arg-type]
            versions[i] = next_version(write, shard, ids[i], prior, None)
        except ElasticError as exc:
            outcomes.refused[i] = exc
            continue
        if exists(prior):
            outcomes.updated.add(i)
    kept = [i for i in range(n) if i not in outcomes.refused] if outcomes.refused else range(n)
    pick = (lambda values: [values[i] for i in kept]) if outcomes.refused else list
    kept_ids, kept_versions = pick(ids), pick(versions)
    routings, rows = pick(columns.routings), pick(columns.rows)
    first = shard.max_seq_no + 1
    seq_nos = list(range(first, first + len(kept_ids)))
    if outcomes.refused:
        outcomes.seq_nos = [-1] * n
        for i, seq_no in zip(kept, seq_nos, strict=True):
            outcomes.seq_nos[i] = seq_no
    else:
        outcomes.seq_nos = seq_nos
    if not kept_ids:
        return outcomes
    sources = list(map(batch.sources.__getitem__, rows))
    with shard.applying:
        records = encode_index_ops(kept_ids, seq_nos, kept_versions, routings, sources)
        shard.translog.append(records, len(kept_ids))
        shard.max_seq_no = seq_nos[-1]
        for i in outcomes.updated:
            shard._retire(priors[i])
        if shard.tombstones:
            for doc_id in kept_ids:
                shard.tombstones.pop(doc_id, None)
        buffer = shard.buffer
        base = buffer.tag + len(buffer)
        shard.version_map.update(zip(kept_ids, range(base, base + len(kept_ids)), strict=True))
        buffer.add_batch(batch, rows, kept_ids, seq_nos, kept_versions, routings)
        shard._changes += 1
    shard._flush_if_full()
    shard.stats.add(index_total=len(kept_ids), index_time=time.perf_counter_ns() - started)
    return outcomes


def apply_replicated(
    shard: Shard, records: bytes, parse_batch: Callable[[list[bytes]], ParsedBatch | None] | None = None
) -> int:
    """A replica's part of its primary's write (the caller holds `shard.writing()` and syncs its
    point before acknowledging): the translog records the primary logged, appended as they are
    and applied with the primary's seq_nos and versions, as a replay does (an operation older
    than its id's current state is skipped: replicas receive writes in any order); how many
    operations. A run of index operations on distinct ids is parsed and buffered by column
    (`parse_batch`), as `index_columns` does on the primary; else one by one."""
    ops, end = decode_records(records)
    if end != len(records):
        raise ElasticError(f"shard [{shard.shard_id}]: a replicated write arrived torn")
    started = time.perf_counter_ns()
    ids = [op.doc_id for op in ops]
    by_column = parse_batch is not None and all(op.op == OP_INDEX for op in ops) and len(set(ids)) == len(ids)
    with shard.applying:
        shard.translog.append(records, len(ops))
        if not by_column:
            for op in ops:
                shard.replay(op)
        else:
            priors = _priors(shard, ids, [False] * len(ids))
            fresh = [i for i, p in enumerate(priors) if p is None or p.seq_no < ops[i].seq_no]
            batch = parse_batch([ops[i].source for i in fresh]) if fresh and parse_batch else None  # type: ignore[misc]
            if fresh and batch is None:
                for i in fresh:
                    shard.replay(ops[i])
            elif fresh:
                for i in fresh:
                    shard._retire(priors[i])
                    if shard.tombstones:
                        shard.tombstones.pop(ids[i], None)
                kept = [ids[i] for i in fresh]
                buffer = shard.buffer
                base = buffer.tag + len(buffer)
                shard.version_map.update(zip(kept, range(base, base + len(kept)), strict=True))
                seq_nos, versions = [ops[i].seq_no for i in fresh], [ops[i].version for i in fresh]
                routings = [ops[i].routing for i in fresh]
                buffer.add_batch(batch, list(range(len(fresh))), kept, seq_nos, versions, routings)  # type: ignore[arg-type]
                shard._changes += 1
            shard.max_seq_no = max(shard.max_seq_no, *(op.seq_no for op in ops))
    shard._flush_if_full()
    shard.stats.add(index_total=len(ops), index_time=time.perf_counter_ns() - started)
    return len(ops)


def _priors(shard: Shard, ids: list[str], auto_ids: list[bool]) -> list[DocState | None]:
    """The current state of each id (None: never seen), as `Shard.current` gives it, looked up
    for all at once: a generated id is never looked up."""
    priors: list[DocState | None] = shard.entries(ids)  # type: ignore[assignment]
    if priors.count(None) != len(priors):  # some are recent: their buffer docs as states
        priors = [
            shard.buffered_state(state) if type(state) is int else state
            for state in priors  # type: ignore[misc]
        ]
    if True not in auto_ids and priors.count(None) == len(priors):  # ids all given, none recent
        todo = list(range(len(ids)))
    else:
        todo = [i for i, state in enumerate(priors) if state is None and not auto_ids[i]]
    if shard.tombstones and todo:
        for i in todo:
            priors[i] = shard.tombstone(ids[i])
        todo = [i for i in todo if priors[i] is None]
    if todo:
        in_segments = shard.segment_states(ids if len(todo) == len(ids) else [ids[i] for i in todo])
        if in_segments:
            for i in todo:
                priors[i] = in_segments.get(ids[i])
    return priors


def _exists(write: ShardWrite, shard: Shard, doc_id: str, prior: DocState) -> VersionConflict:
    """A create's refusal of an existing document."""
    return VersionConflict(
        f"[{doc_id}]: version conflict, document already exists (current version [{prior.version}])",
        extra=conflict_extra(write, shard),
    )


def _apply_one(shard: Shard, write: ShardWrite, op: WriteOp) -> WriteOutcome:
    if op.kind == "delete":
        prior = shard.current(op.doc_id)
        check_seq_no(write, shard, op.doc_id, prior, op.if_seq_no, op.if_primary_term)
        version = next_version(write, shard, op.doc_id, prior, op.external)
        seq_no = shard.delete(op.doc_id, prior, version)  # type: ignore[arg-type]
        return WriteOutcome("deleted" if exists(prior) else "not_found", version, seq_no, shard.primary_term)
    assert op.parsed is not None
    prior, version = index_checks(write, shard, op)
    seq_no = shard.index(op.doc_id, op.parsed, op.routing, prior, version)
    return WriteOutcome("updated" if exists(prior) else "created", version, seq_no, shard.primary_term)


def exists(state: DocState | None) -> bool:
    return state is not None and not state.deleted


def conflict_extra(write: ShardWrite, shard: Shard) -> dict[str, str]:
    return {"index_uuid": write.index_uuid, "shard": str(shard.shard_id), "index": write.index_name}


def check_seq_no(
    write: ShardWrite,
    shard: Shard,
    doc_id: str,
    prior: DocState | None,
    if_seq_no: int | None,
    if_primary_term: int | None,
) -> None:
    """`if_seq_no` / `if_primary_term`: the document must be at that sequence number."""
    if if_seq_no is None and if_primary_term is None:
        return
    required = (
        f"[{doc_id}]: version conflict, required seqNo [{if_seq_no}], primary term [{if_primary_term}]."
    )
    if prior is None or prior.deleted:
        raise VersionConflict(f"{required} but no document was found", extra=conflict_extra(write, shard))
    term = shard.primary_term
    if prior.seq_no != if_seq_no or (if_primary_term is not None and if_primary_term != term):
        raise VersionConflict(
            f"{required} current document has seqNo [{prior.seq_no}] and primary term [{term}]",
            extra=conflict_extra(write, shard),
        )


def index_checks(write: ShardWrite, shard: Shard, op: WriteOp) -> tuple[DocState | None, int]:
    """(prior state, new version) of an index/create operation; raises its version conflict."""
    prior = None if op.auto_id else shard.current(op.doc_id)
    if op.kind == "create" and exists(prior):
        raise _exists(write, shard, op.doc_id, prior)  # type: ignore[arg-type]
    check_seq_no(write, shard, op.doc_id, prior, op.if_seq_no, op.if_primary_term)
    return prior, next_version(write, shard, op.doc_id, prior, op.external)


def next_version(
    write: ShardWrite, shard: Shard, doc_id: str, prior: DocState | None, external: ExternalVersion | None
) -> int:
    """The version a write gives the document: the previous one (a delete's tombstone included)
    plus one, or the external version when it is above the current one."""
    if external is None:
        return prior.version + 1 if prior is not None and prior.version > 0 else 1
    # A looked-up id never written is a deleted state without a sequence number.
    current = None if prior is None or (prior.deleted and prior.seq_no < 0) else prior.version
    try:
        return external.next_version(doc_id, current)
    except VersionRefused as refused:
        raise VersionConflict(refused.reason, extra=conflict_extra(write, shard)) from None


@dataclass(frozen=True, slots=True)
class DocRead:
    """A realtime get's answer from a shard held elsewhere (a shard actor): the document's state
    and source."""

    version: int
    seq_no: int
    routing: str | None
    source: bytes
