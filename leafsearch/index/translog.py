"""The translog: every accepted operation, fsynced before the write is acknowledged.

Records are `[u32 payload length][u32 crc32 of payload][payload]`; a payload is one operation or
a batch of index operations (`encode_index_ops`). A crash can leave a torn
record at the tail; recovery detects it by length or checksum, truncates the file there and
replays only whole records, so an operation is either fully recovered or was never acknowledged.

A new generation file is started when a buffer is handed over to become a segment and when a
commit covers everything logged (a merge, a close); the files of generations a durable commit
covers are deleted (`commits.py`), so the translog holds only what the committed segments do not.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import orjson

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.errors import TranslogFailed

_HEADER = struct.Struct("<II")
OP_INDEX = 1
OP_DELETE = 2


@dataclass(slots=True)
class TranslogOp:
    op: int
    doc_id: str
    seq_no: int
    version: int
    routing: str | None
    source: bytes | None


def encode_op(op: TranslogOp) -> bytes:
    meta = orjson.dumps([op.op, op.doc_id, op.seq_no, op.version, op.routing])
    payload = meta + b"\n" + (op.source or b"")
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def encode_index_ops(
    doc_ids: list[str],
    seq_nos: list[int],
    versions: list[int],
    routings: list[str | None],
    sources: list[bytes],
) -> bytes:
    """One record holding these index operations (a batch record): their metadata as columns,
    then their sources end to end. One checksum covers the batch, so a torn batch is dropped
    whole, as no operation of it was acknowledged; recovery yields its operations in order."""
    meta = orjson.dumps(
        {
            "ids": doc_ids,
            "seq_nos": seq_nos,
            "versions": versions,
            "routings": routings,
            "lengths": list(map(len, sources)),
        }
    )
    payload = meta + b"\n" + b"".join(sources)
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def decode_records(data: bytes) -> tuple[list[TranslogOp], int]:
    """The operations of the whole records at the start of `data` (a translog file's bytes, or
    the records a primary logged for one write, sent to its replicas), and where they end: a torn
    or corrupt tail is not read."""
    ops: list[TranslogOp] = []
    pos = 0
    while pos + _HEADER.size <= len(data):
        length, crc = _HEADER.unpack_from(data, pos)
        end = pos + _HEADER.size + length
        if end > len(data):
            break
        payload = data[pos + _HEADER.size : end]
        if zlib.crc32(payload) != crc:
            break
        ops.extend(_decode_payload(payload))
        pos = end
    return ops, pos


def _decode_payload(payload: bytes) -> Iterator[TranslogOp]:
    """The operations of a record: one, or a batch record's (`encode_index_ops`)."""
    nl = payload.index(b"\n")
    meta = orjson.loads(payload[:nl])
    if type(meta) is dict:
        start = nl + 1
        columns = (meta[key] for key in ("ids", "seq_nos", "versions", "routings", "lengths"))
        for doc_id, seq_no, version, routing, length in zip(*columns, strict=True):
            yield TranslogOp(OP_INDEX, doc_id, seq_no, version, routing, payload[start : start + length])
            start += length
        return
    kind, doc_id, seq_no, version, routing = meta
    source = payload[nl + 1 :] if kind == OP_INDEX else None
    yield TranslogOp(kind, doc_id, seq_no, version, routing, source)


class Translog:
    """Append-only log of one shard, split in generations (`translog-<gen>.tlog`).

    Appends and syncs come from many request threads at once. Appends only queue records (under
    `_lock`, which the shard's lock holder takes briefly); one thread at a time (`_sync_lock`)
    writes everything queued and fsyncs it, so one fsync covers every request whose records were
    queued before it started: a group commit, as Elasticsearch's translog does. A request is
    acknowledged once `synced` has passed the position of its own records.

    A generation roll (`start_generation`, under the shard's lock, in the indexing slot when a
    write hands its buffer over) only opens the new file: the old one's queued records, its fsync
    and the folder's fsync for the new name are the next sync's, before anything after them is
    acknowledged, in file order. Why: they were ~6% of the slot's time under 4 bulk clients, and
    the next sync runs outside the slot anyway.
    """

    def __init__(self, folder: Path, generation: int) -> None:
        """Appends go to the newest generation on disk (at least `generation`): several can be
        left by a crash while a buffer was being flushed, and new operations must follow theirs."""
        self.folder = folder
        folder.mkdir(mode=FOLDER_MODE, parents=True, exist_ok=True)
        self.generation = max([generation, *(_generation_of(p) for p in folder.glob("translog-*.tlog"))])
        created = not self._path(self.generation).exists()
        self._file = open(self._path(self.generation), "ab", opener=private)  # noqa: SIM115 - lives as long as the shard
        if created:  # a new file is there after a power loss only once its folder is synced
            fsync_dir(folder)
        self._lock = threading.Lock()  # the queue, positions and the current file
        self._sync_lock = threading.Lock()  # one writer at a time; rolls wait for it
        self._pending: list[bytes] = []
        #: Generations rolled over and not yet synced: file, generation, records queued for it
        #: and the position they end at.
        self._retired: list[tuple[BinaryIO, int, list[bytes], int]] = []
        self._new_name = False  # a generation file created since the folder's last fsync
        self._appended = 0  # bytes queued since the translog was opened: the position of the last record
        self._synced = 0  # bytes of that count that are written and fsynced
        self._failure: str | None = None  # why a write or fsync failed; nothing is logged after it
        #: Operations per generation still on disk (`_stats` translog.operations).
        self.operations_by_generation: dict[int, int] = {}
        #: When a list: the records appended are added to it too (a primary's write, whose
        #: records its replicas apply: ray_backend/replication.py). Set under the shard's lock.
        self.recording: list[bytes] | None = None

    def _path(self, generation: int) -> Path:
        return self.folder / f"translog-{generation}.tlog"

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def append(self, records: bytes, operations: int = 1) -> int:
        """Queue encoded records (`operations` of them); they are durable once
        `sync(position)` with the returned position (or a later one) has returned."""
        with self._lock:
            self.check()
            self._pending.append(records)
            if self.recording is not None:
                self.recording.append(records)
            self._appended += len(records)
            by_gen = self.operations_by_generation
            by_gen[self.generation] = by_gen.get(self.generation, 0) + operations
            return self._appended

    def stats(self) -> dict[str, int]:
        """`translog` of `_stats`: every generation on disk is uncommitted (a commit deletes the
        generations it covers), so both pairs of figures are the same."""
        operations = sum(self.operations_by_generation.values())
        size = self._appended - self._synced  # queued, not yet in the file
        for path in self.folder.glob("translog-*.tlog"):
            with suppress(FileNotFoundError):
                size += path.stat().st_size
        return {
            "operations": operations,
            "size_in_bytes": size,
            "uncommitted_operations": operations,
            "uncommitted_size_in_bytes": size,
            "earliest_last_modified_age": 0,
        }

    @property
    def position(self) -> int:
        """The position of the last queued record: `sync(position)` makes everything queued so
        far durable."""
        return self._appended

    def check(self) -> None:
        """Refuse an operation before it changes anything once the translog has failed."""
        if self._failure is not None:
            raise TranslogFailed(f"the translog failed earlier and takes no more operations: {self._failure}")

    def sync(self, position: int | None = None) -> None:
        """Make the records up to `position` (default: everything queued) durable.

        Returns at once when a concurrent sync already covered them; otherwise waits for the
        sync in progress and writes whatever is queued then, its own records among them (a rolled
        generation's first). On failure the file is cut back to its last whole record, so no later
        record can ever follow a torn one, and the translog refuses what comes next: after a
        failed fsync the kernel may have dropped the data, a retry proves nothing. Records made
        durable before the failure (a rolled generation's, when the folder's fsync then failed)
        are acknowledged."""
        target = self._appended if position is None else position
        if self._synced >= target:
            return
        with self._sync_lock:
            if self._synced >= target:
                return
            self.check()
            try:
                self._write_pending()
            except TranslogFailed:
                if self._synced < target:
                    raise  # else the caller's records are durable: a rolled generation's, the next failed

    def _write_pending(self) -> None:
        """Write and fsync everything queued (caller holds `_sync_lock`): the records of rolled
        generations into their files first, each fsynced and closed, then the folder (the new
        files' names), then the current generation's."""
        with self._lock:
            retired, self._retired = self._retired, []
            new_name, self._new_name = self._new_name, False
            file, generation, data = self._file, self.generation, b"".join(self._pending)
            self._pending = []
            end = self._appended
        try:
            for old, old_generation, records, old_end in retired:
                self._write(old, old_generation, b"".join(records))
                self._synced = old_end
            if new_name:
                try:
                    fsync_dir(self.folder)
                except OSError as exc:  # the new file's name may not survive a crash
                    self._failure = str(exc)
                    raise TranslogFailed(f"failed to start translog generation {generation}: {exc}") from exc
            self._write(file, generation, data)
            self._synced = end
        finally:
            for old, *_ in retired:  # written and fsynced, or the translog failed
                with suppress(OSError):
                    old.close()

    def _write(self, file: BinaryIO, generation: int, data: bytes) -> None:
        """Write and fsync `data` at the end of `generation`'s `file` (caller holds `_sync_lock`)."""
        if data:
            start = file.tell()
            try:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            except Exception as exc:  # memory too: part of `data` may be in the file
                self._failure = str(exc) or type(exc).__name__
                with suppress(OSError):
                    file.close()  # its buffer may hold the rest of the failed write
                with suppress(OSError):
                    os.truncate(self._path(generation), start)
                raise TranslogFailed(f"failed to write the translog: {exc}") from exc

    def fail(self, reason: str) -> None:
        """Take nothing more: the shard's memory no longer matches what it logged (applying the
        operations failed half way), so it reopens from disk. A write under way finishes first;
        records queued and not yet written are dropped, and the syncs of their requests fail."""
        with self._sync_lock:
            self._failure = reason
            for file in [retired[0] for retired in self._retired] + [self._file]:
                with suppress(OSError):
                    file.close()

    def start_generation(self) -> int:
        """Start a new generation; the older ones stay until a commit covers them
        (`drop_before`). The caller holds the shard's lock, under which every append happens, so
        nothing is queued during the switch. What was queued for the old file, its fsync and the
        folder's fsync (the new name) are the next sync's, in that order: nothing appended after
        the roll is acknowledged before the old generation's records are durable.

        The new file is opened before the old one is let go: if it cannot be, the translog goes on
        in the old generation and the caller's step fails alone. If the folder cannot be fsynced
        after, the new file's name may not survive a crash: the sync fails, as when a write
        fails, and the shard recovers from disk."""
        with self._lock:
            self.check()
            new = open(self._path(self.generation + 1), "ab", opener=private)  # noqa: SIM115
            self._retired.append((self._file, self.generation, self._pending, self._appended))
            self._file, self._pending, self._new_name = new, [], True
            self.generation += 1
            return self.generation

    def drop_before(self, generation: int) -> None:
        """Delete the generations older than `generation`: a commit covers their operations."""
        for path in self.folder.glob("translog-*.tlog"):
            if _generation_of(path) < generation:
                path.unlink()
        with self._lock:
            for old in [g for g in self.operations_by_generation if g < generation]:
                del self.operations_by_generation[old]

    def close(self) -> None:
        """Write what is queued (unless the translog failed) and close the file."""
        with self._sync_lock:
            if self._failure is None:
                self._write_pending()
            with suppress(OSError):
                self._file.close()

    @staticmethod
    def recover(folder: Path, from_generation: int) -> Iterator[TranslogOp]:
        """Whole records of every generation >= `from_generation`; a torn tail is cut off."""
        if not folder.exists():
            return
        paths = sorted(
            (p for p in folder.glob("translog-*.tlog") if _generation_of(p) >= from_generation),
            key=_generation_of,
        )
        for path in paths:
            data = path.read_bytes()
            ops, pos = decode_records(data)
            yield from ops
            if pos != len(data):
                with open(path, "r+b") as fh:
                    fh.truncate(pos)
                    os.fsync(fh.fileno())


def _generation_of(path: Path) -> int:
    return int(path.stem.split("-")[1])
