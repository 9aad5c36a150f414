"""A disk that loses what was never fsynced: power-loss simulation for in-process durability tests.

`kill -9` cannot show a missing fsync: the kernel's page cache outlives the process, so every
byte written is still there when the node starts again. `PowerLossDisk` watches the calls that
make data durable in this process, `os.fsync` and `os.fdatasync` of a file or of a folder, and
keeps what each one made durable, as fsync(2) defines it:

- fsync of a file makes its content durable, as it is at that moment;
- fsync of a folder makes its entries durable, as they are at that moment: files and folders
  created or renamed into it, and those removed, since its last fsync. Until then a new file is
  not there after a power loss, whatever was fsynced of its content, and a rename or a removal
  did not happen ("Calling fsync() does not necessarily ensure that the entry in the directory
  containing the file has also reached disk", fsync(2)).

`power_loss(into)` writes the folder tree as the machine would find it once power comes back:
each folder with the entries its last fsync saw, each file with the content of its last fsync
(empty when it never had one). Files and folders are followed by inode, and renames through
`os.replace`/`os.rename` are followed too, so a folder renamed into place brings along what was
fsynced inside it and an inode number the file system hands out again names a new file.

Linux only (/proc/self/fd names what a descriptor is). Writes of other processes (search
workers, the merge worker) are not seen: a test keeps its durable writes in this process.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


class _Node:
    """A file or folder as the simulation follows it: where it is now, and what of it is durable."""

    __slots__ = ("path", "folder", "content", "entries")

    def __init__(self, path: str, folder: bool) -> None:
        self.path = path
        self.folder = folder
        self.content = b""  # a file's content at its last fsync
        self.entries: dict[str, _Node] = {}  # a folder's entries at its last fsync


class PowerLossDisk:
    """The durable state of the tree under `root` (an existing folder; what it holds now counts
    as durable), kept up to date while `installed()`."""

    def __init__(self, root: Path) -> None:
        self.root = str(root.resolve())
        self._lock = threading.Lock()
        self._by_inode: dict[int, _Node] = {}
        self._top = self._node(os.lstat(self.root).st_ino, self.root, True)
        self._take_as_durable(self._top)

    def _node(self, inode: int, path: str, folder: bool) -> _Node:
        """The node of an inode seen at `path` (caller holds the lock or is the constructor): the
        one known, unless that one was elsewhere (its inode was freed and given to a new file)."""
        known = self._by_inode.get(inode)
        if known is not None and known.path == path and known.folder == folder:
            return known
        node = self._by_inode[inode] = _Node(path, folder)
        return node

    def _take_as_durable(self, node: _Node) -> None:
        for entry in os.scandir(node.path):
            inode = entry.stat(follow_symlinks=False).st_ino
            child = self._node(inode, entry.path, entry.is_dir(follow_symlinks=False))
            node.entries[entry.name] = child
            if child.folder:
                self._take_as_durable(child)
            else:
                child.content = Path(entry.path).read_bytes()

    def _inside(self, path: str) -> bool:
        return path == self.root or path.startswith(self.root + os.sep)

    # ---- what the process does -----------------------------------------------------------------

    def _synced(self, fd: int) -> None:
        """After a successful fsync of `fd`: what it made durable."""
        path = os.readlink(f"/proc/self/fd/{fd}")
        if not self._inside(path):
            return
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            listed = []
            for entry in os.scandir(path):
                try:
                    inode = entry.stat(follow_symlinks=False).st_ino
                except FileNotFoundError:  # removed while listed: not an entry any more
                    continue
                listed.append((entry.name, inode, entry.path, entry.is_dir(follow_symlinks=False)))
            with self._lock:
                folder = self._node(info.st_ino, path, True)
                folder.entries = {name: self._node(inode, p, d) for name, inode, p, d in listed}
            return
        with open(f"/proc/self/fd/{fd}", "rb") as fh:
            content = fh.read()
        with self._lock:
            self._node(info.st_ino, path, False).content = content

    def _renamed(self, src: str, dst: str) -> None:
        """After `os.replace(src, dst)`: the node moved keeps what is durable of it (and so do
        the nodes under a folder moved)."""
        src, dst = os.path.abspath(src), os.path.abspath(dst)
        if not (self._inside(src) or self._inside(dst)):
            return
        with self._lock:
            for node in self._by_inode.values():
                if node.path == src:
                    node.path = dst
                elif node.path.startswith(src + os.sep):
                    node.path = dst + node.path[len(src) :]

    @contextmanager
    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[PowerLossDisk]:
        """Watch `os.fsync`, `os.fdatasync`, `os.replace` and `os.rename` for the block."""

        def after(real: Callable[..., None], record: Callable[..., None]) -> Callable[..., None]:
            def call(*args: object, **kwargs: object) -> None:
                real(*args, **kwargs)
                record(*args)

            return call

        with monkeypatch.context() as patch:
            patch.setattr(os, "fsync", after(os.fsync, self._synced))
            patch.setattr(os, "fdatasync", after(os.fdatasync, self._synced))
            patch.setattr(os, "replace", after(os.replace, self._renamed))
            patch.setattr(os, "rename", after(os.rename, self._renamed))
            yield self

    # ---- after the power loss ------------------------------------------------------------------

    def power_loss(self, into: Path) -> None:
        """Write into the new folder `into` the tree as it is after a power loss now."""
        with self._lock:
            _write(self._top, into)


def _write(folder: _Node, into: Path) -> None:
    into.mkdir(mode=0o700)
    for name, node in folder.entries.items():
        if node.folder:
            _write(node, into / name)
        else:
            (into / name).write_bytes(node.content)
