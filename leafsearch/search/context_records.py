"""The node's reader contexts on disk: one record per open context, and the ids that ended.

A point in time or a scroll survives a restart (`kill -9` included) because each shard keeps its
snapshot as a pin (index/pins.py) and the node keeps this record of the context: who opened it,
what it reads (index uuid, shard, alias filter per target), its keep-alive, and for a scroll the
request, its cursor and the batch it can replay (contexts.py). A record is pickled (every part is
already sent to search workers that way) and durable before the response naming the context's id
(or a scroll's next id) is sent. The data folder is the node's alone (0700), so unpickling reads
only what the node wrote.

A context's record has two files, written in turn (`<key>.ctx`, `<key>.ctx1`), each a header
(generation, length, CRC-32) and the pickle: a write truncates the older one, writes it and
`fdatasync`s it, and the folder is fsynced only when a file is created. Why: a scroll records its
position every few batches (its record names the next batches' ends: scroll_pit.py), and a
temporary file renamed into place cost two fsyncs and the folder's (0.83 ms of CPU and 8 ms a
batch, against 0.2 and 3 ms; bench/RESULTS.md, "Streaming export"). A write torn by a crash fails
its CRC, and the other file holds the record before it, whose response was not sent. (A record of
an earlier format, a bare pickle or without `ahead`, is still read.)

Ended contexts are appended to `ended.log` (one JSON line each, not fsynced: losing the last
lines to a power loss changes only the wording of a 404), so that after a restart an id that
expired or was cleared still answers why, distinct from an id the node never issued. At start
the log is cut to its last `keep` lines.
"""

from __future__ import annotations

import os
import pickle
import struct
import zlib
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.index.pins import check_name

_ENDED = "ended.log"
#: A record file's header: magic, generation, length and CRC-32 of the pickle that follows.
_HEADER = struct.Struct("<4sQII")
_MAGIC = b"LSC1"
#: The two files of a record: odd generations in the first (the first record), even ones in the other.
_SLOTS = (".ctx", ".ctx1")


class ContextRecords:
    """The records of one node's contexts, in `folder` (`<data>/contexts`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        if not folder.exists():
            folder.mkdir(mode=FOLDER_MODE)
            fsync_dir(folder.parent)
        self._lines = 0  # lines of the ended log
        #: key -> the generation of its latest record (the next write goes to the other file)
        self._generations: dict[str, int] = {}

    def _path(self, key: str, slot: int = 0) -> Path:
        return self.folder / f"{check_name(key)}{_SLOTS[slot]}"

    def write(self, key: str, record: dict[str, Any]) -> None:
        """Write or replace a record; durable when this returns (in the file not holding the
        latest one, so a crash meanwhile leaves that one)."""
        generation = self._generations.get(key, 0) + 1
        data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        path = self._path(key, (generation - 1) % 2)
        created = not path.exists()
        fd = private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            os.write(fd, _HEADER.pack(_MAGIC, generation, len(data), zlib.crc32(data)) + data)
            os.fdatasync(fd)
        finally:
            os.close(fd)
        if created:
            fsync_dir(self.folder)
        self._generations[key] = generation

    def remove(self, key: str) -> None:
        """Delete a record durably: once this returns, a restart does not restore the context."""
        self._generations.pop(key, None)
        removed = False
        for slot in range(len(_SLOTS)):
            path = self._path(key, slot)
            if path.exists():
                path.unlink()
                removed = True
        if removed:
            fsync_dir(self.folder)

    def load(self) -> dict[str, dict[str, Any]]:
        """Every whole record (the latest of its two files), by key; a crash's temporary files
        and unreadable records go."""
        records: dict[str, dict[str, Any]] = {}
        for entry in sorted(self.folder.iterdir()):
            if entry.name == _ENDED:
                continue
            key, suffix = entry.name.rsplit(".", 1)[0], "." + entry.name.rsplit(".", 1)[-1]
            read = _read(entry) if suffix in _SLOTS else None
            if read is not None and read[1].get("key") == key:
                generation, record = read
                if generation > self._generations.get(key, -1):
                    self._generations[key] = generation
                    records[key] = record
                continue
            entry.unlink(missing_ok=True)
        return records

    def ended(self, keep: int) -> OrderedDict[str, tuple[str, float, str]]:
        """The last `keep` ended contexts, oldest first: key -> (how, wall time, token). The log
        is rewritten with only those."""
        path = self.folder / _ENDED
        ended: OrderedDict[str, tuple[str, float, str]] = OrderedDict()
        if path.exists():
            for line in path.read_bytes().splitlines():
                try:
                    key, how, when, token = orjson.loads(line)
                except (orjson.JSONDecodeError, ValueError, TypeError):
                    continue  # a line torn by a crash
                ended[key] = (how, when, token)
                ended.move_to_end(key)
        while len(ended) > keep:
            ended.popitem(last=False)
        self._rewrite(ended)
        return ended

    def _rewrite(self, ended: OrderedDict[str, tuple[str, float, str]]) -> None:
        path = self.folder / _ENDED
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb", opener=private) as fh:
            fh.write(b"".join(orjson.dumps([k, *v]) + b"\n" for k, v in ended.items()))
        os.replace(tmp, path)
        self._lines = len(ended)

    def add_ended(self, key: str, ended: OrderedDict[str, tuple[str, float, str]]) -> None:
        """Log that `key` (the newest entry of `ended`, the registry's memory) ended. The log is
        cut back to `ended` once it holds twice as many lines, so it stays bounded."""
        if self._lines >= 2 * max(len(ended), 1):
            self._rewrite(ended)
            return
        with open(self.folder / _ENDED, "ab", opener=private) as fh:
            fh.write(orjson.dumps([key, *ended[key]]) + b"\n")
        self._lines += 1


def _read(path: Path) -> tuple[int, dict[str, Any]] | None:
    """A record file's generation and record; None when it is torn or unreadable (a record of
    the earlier format, a bare pickle in the first file, is generation 1)."""
    try:
        raw = path.read_bytes()
        if raw[:4] == _MAGIC and len(raw) >= _HEADER.size:
            _, generation, length, crc = _HEADER.unpack_from(raw)
            data = raw[_HEADER.size :]
            if len(data) != length or zlib.crc32(data) != crc:
                return None
        else:
            generation, data = 1, raw
        record = pickle.loads(data)
    except Exception:  # written by another version, or torn by a disk error
        return None
    return (generation, record) if isinstance(record, dict) else None
