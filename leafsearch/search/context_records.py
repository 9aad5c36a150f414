"""The node's reader contexts on disk: one record per open context, and the ids that ended.

A point in time or a scroll survives a restart (`kill -9` included) because each shard keeps its
snapshot as a pin (index/pins.py) and the node keeps this record of the context: who opened it,
what it reads (index uuid, shard, alias filter per target), its keep-alive, and for a scroll the
request, its cursor and the batch it can replay (contexts.py). A record is pickled (every part is
already sent to search workers that way), written to a temporary file, fsynced, renamed into
place and its folder fsynced before the response naming the context's id (or a scroll's next
id) is sent. The data folder is the node's alone (0700), so unpickling reads only what the node
wrote.

Ended contexts are appended to `ended.log` (one JSON line each, not fsynced: losing the last
lines to a power loss changes only the wording of a 404), so that after a restart an id that
expired or was cleared still answers why, distinct from an id the node never issued. At start
the log is cut to its last `keep` lines.
"""

from __future__ import annotations

import os
import pickle
from collections import OrderedDict
from pathlib import Path
from typing import Any

import orjson

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.index.pins import check_name

_ENDED = "ended.log"


class ContextRecords:
    """The records of one node's contexts, in `folder` (`<data>/contexts`)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        if not folder.exists():
            folder.mkdir(mode=FOLDER_MODE)
            fsync_dir(folder.parent)
        self._lines = 0  # lines of the ended log

    def _path(self, key: str) -> Path:
        return self.folder / f"{check_name(key)}.ctx"

    def write(self, key: str, record: dict[str, Any]) -> None:
        """Write or replace a record; durable when this returns."""
        path = self._path(key)
        tmp = path.with_suffix(".tmp")
        try:
            with open(tmp, "wb", opener=private) as fh:
                fh.write(pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        fsync_dir(self.folder)

    def remove(self, key: str) -> None:
        """Delete a record durably: once this returns, a restart does not restore the context."""
        path = self._path(key)
        if path.exists():
            path.unlink()
            fsync_dir(self.folder)

    def load(self) -> dict[str, dict[str, Any]]:
        """Every whole record, by key; a crash's temporary files and unreadable records go."""
        records: dict[str, dict[str, Any]] = {}
        for entry in sorted(self.folder.iterdir()):
            if entry.name == _ENDED:
                continue
            if entry.suffix == ".ctx":
                try:
                    record = pickle.loads(entry.read_bytes())
                except Exception:  # written by another version, or torn by a disk error
                    record = None
                if isinstance(record, dict) and record.get("key") == entry.stem:
                    records[entry.stem] = record
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
