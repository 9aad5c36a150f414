"""Reading the engine's array files (`.npy`, `.npz`) from any thread.

numpy reads an array file's header (its dtype and shape, a Python literal) with
`ast.literal_eval`. CPython 3.11 keeps the AST constructor's recursion depth in state that the
whole interpreter shares, and a construction can let another thread run (a garbage collection
during it runs finalizers): two threads opening array files at once then fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905). The suite met it
in `Segment._load` on fetch threads, in 2 of 5 full runs. So every array file is opened under one
lock: it guards the interpreter's process-wide state, which is why it is this module's and not an
owner's. Opening reads the header and maps the file (or reads a small one whole).
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

_HEADERS = threading.Lock()


def load(path: Path, *, mmap: bool = False) -> np.ndarray:
    """The array of a `.npy` file: memory-mapped read-only (`mmap`), or read whole."""
    with _HEADERS:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def load_all(path: Path) -> dict[str, np.ndarray]:
    """Every array of a `.npz` file, by name, read whole."""
    with _HEADERS, np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}
