"""Durability helpers shared by everything that renames a file into place, and the modes of what
a node creates: its files are its owner's alone (0600, folders 0700) whatever the process's umask,
so an in-process `Node` or `--data` keeps the README's promise as `leafsearch serve` does."""

from __future__ import annotations

import os
from pathlib import Path

FILE_MODE = 0o600
FOLDER_MODE = 0o700


def private(path: str | os.PathLike, flags: int) -> int:
    """An `opener` for `open()`: a file the node creates is created 0600."""
    return os.open(path, flags, FILE_MODE)


def fsync_dir(folder: Path) -> None:
    """Fsync a folder, so that a rename or a new entry in it survives a crash."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically and durably, readable by the owner only (0600): the
    data is fsynced before the rename, and the folder after it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    fsync_dir(path.parent)
