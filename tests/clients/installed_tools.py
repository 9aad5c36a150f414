"""The tools the external tests install from outside the project (the Node.js packages of
tests/clients/js, client 9's venv), kept once per user rather than once per checkout.

Each is a folder of the user's cache (`LEAFSEARCH_TEST_TOOLS`, else `$XDG_CACHE_HOME` or
`~/.cache`, then `leafsearch-tests/`) named after a digest of what it is installed from (a lock
file, a requirements file, the interpreter), so a checkout whose pins changed gets its own, and a
second checkout or a fresh clone on the same machine finds it made: a first run made them in
each checkout, about 27 s of CPU and 450 MB (bench/RESULTS.md "Session 22"). One process at a time
installs (xdist workers, two checkouts' runs), under an exclusive `flock`; an install cut short
leaves no `.installed` mark, and the next one starts the folder again.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

FOLDER_VARIABLE = "LEAFSEARCH_TEST_TOOLS"
_MARK = ".installed"


def tools_folder() -> Path:
    chosen = os.environ.get(FOLDER_VARIABLE)
    if chosen:
        return Path(chosen)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "leafsearch-tests"


def installed(name: str, inputs: Iterable[bytes], install: Callable[[Path], None]) -> Path:
    """`<tools_folder>/<name>-<digest of inputs>`, made by `install(folder)` (an empty folder) unless
    a finished install is there."""
    root = tools_folder()
    root.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    for part in inputs:
        digest.update(hashlib.sha256(part).digest())
    folder = root / f"{name}-{digest.hexdigest()[:16]}"
    with (root / f"{name}.lock").open("wb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file is closed
        if not (folder / _MARK).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            install(folder)
            (folder / _MARK).touch()
    return folder


def link(at: Path, target: Path) -> None:
    """`at` a symbolic link to `target`, replaced at once (a reader sees the old or the new one);
    a folder there (a checkout's own install, from before the cache) is removed first."""
    if at.is_symlink() and at.readlink() == target:
        return
    if at.is_dir() and not at.is_symlink():
        shutil.rmtree(at)
    new = at.with_name(f".{at.name}-{os.getpid()}")
    new.unlink(missing_ok=True)
    new.symlink_to(target, target_is_directory=True)
    os.replace(new, at)
