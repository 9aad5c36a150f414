"""Durable pins: a reader context's snapshot of one shard, kept on disk so it survives a restart.

A point in time or a scroll pins each shard's Searcher (search/shard_contexts.py). A Searcher is
a list of immutable segment folders plus the live-docs arrays of the moment it was taken, so a pin
written to disk is only that: the segment names and each segment's live documents, bit-packed
(`pins/<name>.npz` in the shard folder, 1 bit per document: 125 KB per million documents). While
the file exists the shard counts one reference on each segment it names, so neither a merge nor
a restart (`Shard._remove_orphans`) deletes them; deleting the file (`Shard.unpin`) lets them go.

Written to a temporary file, fsynced, renamed into place and the folder fsynced, before the
context's id is handed out: after `kill -9` or a power loss the pin is whole or absent. Names are
the registry's random hex keys (never client text).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from leafsearch.common.durable import FOLDER_MODE, fsync_dir, private
from leafsearch.index import array_files

PINS = "pins"
_NAME = re.compile(r"[0-9a-f]{1,64}")


@dataclass(frozen=True, slots=True)
class PinnedSnapshot:
    """What a pin file holds: per segment of the snapshot, its name and live docs (None: all)."""

    segments: tuple[str, ...]
    live: tuple[np.ndarray | None, ...]


def check_name(name: str) -> str:
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad pin name {name!r}")
    return name


def pin_path(shard_folder: Path, name: str) -> Path:
    return shard_folder / PINS / f"{check_name(name)}.npz"


def write_pin(shard_folder: Path, name: str, snapshot: PinnedSnapshot) -> None:
    """Write a pin durably (temporary file, fsync, rename, folder fsync)."""
    folder = shard_folder / PINS
    if not folder.exists():
        folder.mkdir(mode=FOLDER_MODE, exist_ok=True)
        fsync_dir(shard_folder)
    arrays: dict[str, np.ndarray] = {
        "segments": np.array(snapshot.segments, dtype=str),
        "max_docs": np.array([-1 if live is None else len(live) for live in snapshot.live], dtype=np.int64),
    }
    for i, live in enumerate(snapshot.live):
        if live is not None:
            arrays[f"live_{i}"] = np.packbits(live)
    path = pin_path(shard_folder, name)
    tmp = path.with_suffix(".tmp")
    try:
        with open(tmp, "wb", opener=private) as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(folder)


def read_pins(shard_folder: Path) -> dict[str, PinnedSnapshot]:
    """Every whole pin of a shard, by name; what a crash left half written is deleted."""
    folder = shard_folder / PINS
    if not folder.exists():
        return {}
    pins: dict[str, PinnedSnapshot] = {}
    for entry in sorted(folder.iterdir()):
        if entry.suffix != ".npz" or not _NAME.fullmatch(entry.stem):
            entry.unlink(missing_ok=True)
            continue
        data = array_files.load_all(entry)
        names = tuple(str(s) for s in data["segments"])
        live = tuple(
            None if size < 0 else np.unpackbits(data[f"live_{i}"], count=int(size)).astype(bool)
            for i, size in enumerate(data["max_docs"].tolist())
        )
        pins[entry.stem] = PinnedSnapshot(names, live)
    return pins


def remove_pin(shard_folder: Path, name: str) -> None:
    """Delete a pin durably: once this returns, a restart no longer restores it."""
    path = pin_path(shard_folder, name)
    if path.exists():
        path.unlink()
        fsync_dir(path.parent)


def pins_size(shard_folder: Path) -> int:
    folder = shard_folder / PINS
    if not folder.exists():
        return 0
    total = 0
    for entry in folder.iterdir():
        try:
            total += entry.stat().st_size
        except FileNotFoundError:
            continue
    return total
