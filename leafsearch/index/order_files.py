"""A segment's sort order as an immutable file beside it, memory-mapped by every process.

Why: a search worker process builds the order of each segment by a sort key on its first query
with that key (a `lexsort` of the segment: tens of milliseconds at a million documents), and every
worker did so again for itself, holding its own copy. A segment never changes, so its order by a
key is a constant: the first process that needs it writes it into the segment's folder, and every
process (this one, the other workers, the server after a restart) maps that file instead of
sorting. The page cache holds one copy for all of them, and the file goes with its segment's
folder (merged away, index deleted, orphans removed at recovery).

Name: `sort-<digest>.order`, the digest (SHA-256) of what determines the order's content: the
format, and per sort spec the field's *number* in the segment (never its name: nothing a client
sends becomes a file name), order, `missing`, `mode`, `numeric_type`, the kind it compares in and
the field type's parameters. Two requests that sort alike share the file whatever they call the
field.

Layout: magic (8 bytes), header length (8, little-endian), JSON header (file size, the boot it
was written in, per array its dtype, length and offset; per sort column whether it is flagged and
which array holds its own terms, if any), arrays aligned to 64 bytes, a trailer (8). A file is
written to a temporary name and renamed into place, so a name always means a whole file; a reader
still checks magic, size, header and trailer, and takes anything else for absent (it is then
rebuilt and replaced). Two processes writing one order at once each write their own temporary
file; both hold the same bytes, and the last rename wins. Temporary files a crash left behind are
removed when the shard opens its segments (`remove_partial_files`).

No fsync, and why that is safe: the file is a cache of what the segment already holds. Until the
machine stops, every process reads a renamed file whole from the page cache, even after the
writer died (kill -9 loses no written page). Only a power loss or a kernel crash can leave a
renamed file with pages never written (zeros of the right size), and that is a new boot: the
header records the kernel's boot id (`/proc/sys/kernel/random/boot_id`), and a file from another
boot is taken for absent and rewritten. Where the boot id is unknown (not Linux), files are
fsynced, with their folder, and say so (`boot: null`). Why not always fsync: two fsyncs cost 13 ms
on the bench machine, per segment, on the query that first needs the order.

Cost: writing is one pass over the order's arrays (12 + 8 per key column bytes per document, into
the page cache) on the first query of a key on a segment of `STORED_MIN_DOCS` documents or more
(smaller segments sort faster than a file opens, so each process sorts them itself); reading is
one `mmap` and a JSON header.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

FORMAT = 1
PREFIX = "sort-"
SUFFIX = ".order"
_PARTIAL = ".partial-"
_MAGIC = b"LSORDER\x01"
_TRAILER = b"LSORDEND"
_ALIGN = 64
#: Segments smaller than this sort in less time than a file takes to write or open.
STORED_MIN_DOCS = 8192


@dataclass
class StoredOrder:
    """What a file holds: the order, its inverse, the sorted key columns, and per sort column
    whether documents without a value are flagged and its own term list (keyword columns whose
    `missing` added a term the segment lacks; None: the segment's terms)."""

    order: np.ndarray
    rank: np.ndarray
    keys: list[np.ndarray]
    flagged: list[bool]
    terms: list[np.ndarray | None]

    @property
    def nbytes(self) -> int:
        own = sum(t.nbytes for t in self.terms if t is not None)
        return self.order.nbytes + self.rank.nbytes + sum(k.nbytes for k in self.keys) + own


def file_name(description: Any) -> str:
    """The file name of an order described by `description` (JSON-able, field numbers only)."""
    digest = hashlib.sha256(orjson.dumps([FORMAT, description], option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"{PREFIX}{digest[:40]}{SUFFIX}"


def boot_id() -> str | None:
    """The running kernel's boot id (None where there is none to read)."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


_BOOT = boot_id()


def write(path: Path, stored: StoredOrder) -> None:
    """Write `stored` at `path`: a temporary file renamed into place (fsynced first, with the
    folder after, only where the boot id is unknown). Raises OSError when it cannot (a full disk,
    the segment deleted meanwhile): the caller keeps its order in memory."""
    arrays: list[tuple[str, np.ndarray]] = [("order", stored.order), ("rank", stored.rank)]
    arrays += [(f"key{i}", k) for i, k in enumerate(stored.keys)]
    columns = []
    for i, (flagged, terms) in enumerate(zip(stored.flagged, stored.terms, strict=True)):
        if terms is not None:
            arrays.append((f"terms{i}", terms))
        columns.append({"flagged": flagged, "terms": None if terms is None else f"terms{i}"})
    entries = []
    offset = 0
    for name, arr in arrays:
        arr = np.ascontiguousarray(arr)
        entries.append([name, arr.dtype.str, len(arr), offset])
        offset += _padded(arr.nbytes)
    header: dict[str, Any] = {
        "format": FORMAT,
        "boot": _BOOT,
        "arrays": entries,
        "columns": columns,
        "size": 0,
    }
    while True:  # the header holds the file's size, which depends on the header's length
        body = orjson.dumps(header)
        start = _padded(16 + len(body))
        if header["size"] == start + offset + len(_TRAILER):
            break
        header["size"] = start + offset + len(_TRAILER)
    tmp = path.with_name(f"{path.name}{_PARTIAL}{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(_MAGIC + len(body).to_bytes(8, "little") + body)
            fh.write(b"\0" * (start - 16 - len(body)))
            for _, arr in arrays:
                data = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
                fh.write(memoryview(data))
                fh.write(b"\0" * (_padded(arr.nbytes) - arr.nbytes))
            fh.write(_TRAILER)
            if _BOOT is None:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if _BOOT is None:
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def read(path: Path) -> StoredOrder | None:
    """The order stored at `path`, its arrays mapped read-only; None when there is no whole file
    there (absent, truncated, or not this format)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 16 + len(_TRAILER):
                return None
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (FileNotFoundError, ValueError):
        return None
    try:
        return _parse(data, size)
    except (ValueError, KeyError, TypeError, IndexError):
        return None


def _parse(data: mmap.mmap, size: int) -> StoredOrder | None:
    if data[:8] != _MAGIC or data[size - len(_TRAILER) :] != _TRAILER:
        return None
    length = int.from_bytes(data[8:16], "little")
    if 16 + length > size:
        return None
    header = orjson.loads(data[16 : 16 + length])
    if header.get("format") != FORMAT or header.get("size") != size:
        return None
    if header.get("boot") is not None and header["boot"] != _BOOT:
        return None  # written without fsync before the machine last started: maybe torn
    start = _padded(16 + length)
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, count, offset in header["arrays"]:
        dt = np.dtype(dtype)
        if offset % _ALIGN or start + offset + count * dt.itemsize > size - len(_TRAILER):
            return None
        arrays[name] = np.frombuffer(data, dt, count, start + offset)
    columns = header["columns"]
    keys = [arrays[f"key{i}"] for i in range(sum(1 for name in arrays if name.startswith("key")))]
    order, rank = arrays["order"], arrays["rank"]
    if len(rank) != len(order) or any(len(k) != len(order) for k in keys):
        return None
    return StoredOrder(
        order,
        rank,
        keys,
        [bool(c["flagged"]) for c in columns],
        [None if c["terms"] is None else arrays[c["terms"]] for c in columns],
    )


def remove_partial_files(folder: Path) -> None:
    """Delete the temporary order files a crash left in a segment folder (when the shard opens
    its segments; a process still writing one then fails to rename it, and keeps its order in
    memory)."""
    for entry in folder.glob(f"{PREFIX}*{_PARTIAL}*"):
        entry.unlink(missing_ok=True)


def _padded(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
