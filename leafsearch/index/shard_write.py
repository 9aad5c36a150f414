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

from dataclasses import dataclass
from typing import Literal

from leafsearch.errors import ElasticError, VersionConflict
from leafsearch.index.parsed import ParsedBatch, ParsedDoc
from leafsearch.index.shard import PRIMARY_TERM, DocState, Shard
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
class ShardWrite:
    """Operations for one shard, applied in order (Elasticsearch's BulkShardRequest)."""

    index_name: str
    index_uuid: str
    shard_id: int
    ops: tuple[WriteOp, ...]
    #: index/create documents parsed together (`Mapping.parse_batch`), which ops name by `row`:
    #: their values join the buffer column by column.
    batch: ParsedBatch | None = None


@dataclass(frozen=True, slots=True)
class WriteOutcome:
    """What an applied operation did (Elasticsearch's DocWriteResponse, less the request's part)."""

    result: Literal["created", "updated", "deleted", "not_found"]
    version: int
    seq_no: int


#: Per operation of a `ShardWrite`, in order: its outcome, or the refusal that left it unapplied.
ShardWriteOutcome = list[WriteOutcome | ElasticError]


def apply_write(shard: Shard, write: ShardWrite) -> ShardWriteOutcome:
    """Apply `write` to `shard`, whose `writing()` the caller holds; the caller syncs the point
    before acknowledging any of it."""
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
                outcomes.append(WriteOutcome("updated" if exists(prior) else "created", version, seq_no))
        return outcomes
    for op in write.ops:
        try:
            outcomes.append(_apply_one(shard, write, op))
        except ElasticError as exc:
            outcomes.append(exc)
    return outcomes


def _apply_one(shard: Shard, write: ShardWrite, op: WriteOp) -> WriteOutcome:
    if op.kind == "delete":
        prior = shard.current(op.doc_id)
        check_seq_no(write, shard, op.doc_id, prior, op.if_seq_no, op.if_primary_term)
        version = next_version(write, shard, op.doc_id, prior, op.external)
        seq_no = shard.delete(op.doc_id, prior, version)  # type: ignore[arg-type]
        return WriteOutcome("deleted" if exists(prior) else "not_found", version, seq_no)
    assert op.parsed is not None
    prior, version = index_checks(write, shard, op)
    seq_no = shard.index(op.doc_id, op.parsed, op.routing, prior, version)
    return WriteOutcome("updated" if exists(prior) else "created", version, seq_no)


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
    if prior.seq_no != if_seq_no or (if_primary_term is not None and if_primary_term != PRIMARY_TERM):
        raise VersionConflict(
            f"{required} current document has seqNo [{prior.seq_no}] and primary term [{PRIMARY_TERM}]",
            extra=conflict_extra(write, shard),
        )


def index_checks(write: ShardWrite, shard: Shard, op: WriteOp) -> tuple[DocState | None, int]:
    """(prior state, new version) of an index/create operation; raises its version conflict."""
    prior = None if op.auto_id else shard.current(op.doc_id)
    if op.kind == "create" and exists(prior):
        raise VersionConflict(
            f"[{op.doc_id}]: version conflict, document already exists (current version [{prior.version}])",  # type: ignore[union-attr]
            extra=conflict_extra(write, shard),
        )
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
