"""Reading the engine's array files (`.npy`, `.npz`) from any thread, and writing them.

numpy reads an array file's header (its dtype and shape, a Python literal) with
`ast.literal_eval`. CPython 3.11 keeps the AST constructor's recursion depth in state that the
whole interpreter shares, and a construction can let another thread run (a garbage collection
during it runs finalizers): two threads opening array files at once then fail with
`SystemError: AST constructor recursion depth mismatch` (python/cpython#106905). The suite met it
in `Segment._load` on fetch threads, in 2 of 5 full runs. So every array file is opened under one
lock: it guards the interpreter's process-wide state, which is why it is this module's and not an
owner's. Opening reads the header and maps the file (or reads a small one whole).

Integer arrays are written in the narrowest dtype that holds their values (`compact`): doc ids,
frequencies and ordinals are small. An `Appender` writes an array given a block at a time, so a
merge holds one block of a column rather than the whole column, to the same bytes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np

from leafsearch.common.durable import private

_HEADERS = threading.Lock()
_NARROW = (np.uint8, np.int8, np.uint16, np.int16, np.uint32, np.int32)
#: Values an `Appender` converts at once when it saves its array.
_SAVE_CHUNK = 1 << 16


def load(path: Path, *, mmap: bool = False) -> np.ndarray:
    """The array of a `.npy` file: memory-mapped read-only (`mmap`), or read whole."""
    with _HEADERS:
        return np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)


def load_all(path: Path) -> dict[str, np.ndarray]:
    """Every array of a `.npz` file, by name, read whole."""
    with _HEADERS, np.load(path, allow_pickle=False) as data:
        return {name: data[name] for name in data.files}


def _narrowest(lo: int, hi: int, dtype: np.dtype) -> np.dtype:
    for narrow in _NARROW:
        info = np.iinfo(narrow)
        if info.min <= lo and hi <= info.max:
            return np.dtype(narrow)
    return dtype


def compact(arr: np.ndarray) -> np.ndarray:
    """The array in the smallest integer dtype that holds every value (others as they are)."""
    if arr.dtype.kind not in "iu" or arr.size == 0:
        return arr
    return arr.astype(_narrowest(int(arr.min()), int(arr.max()), arr.dtype), copy=False)


def save(path: Path, arr: np.ndarray) -> None:
    """Write `arr` as the `.npy` file `path`, created 0600; not fsynced: a segment's files are
    fsynced together once it is complete (`SegmentWriter.write`)."""
    with open(path, "wb", opener=private) as fh:
        np.save(fh, arr, allow_pickle=False)


class Appender:
    """A 1-d integer array written a block at a time into a scratch file, then saved (`save`) as
    the `.npy` file `save(path, compact(whole array))` writes, byte for byte, converting a chunk
    at a time: what it holds is a block, whatever the array's length."""

    def __init__(self, scratch: Path, dtype: np.dtype | type) -> None:
        self.scratch = scratch
        self.dtype = np.dtype(dtype)
        self.count = 0
        self._lo = self._hi = 0
        self._fh = open(scratch, "wb", opener=private)  # noqa: SIM115 - closed by save or discard

    def append(self, block: np.ndarray) -> None:
        if not len(block):
            return
        block = np.ascontiguousarray(block, dtype=self.dtype)
        lo, hi = int(block.min()), int(block.max())
        self._lo, self._hi = (lo, hi) if not self.count else (min(self._lo, lo), max(self._hi, hi))
        self._fh.write(block.data)
        self.count += len(block)

    def save(self, path: Path) -> None:
        """Write the array to `path` (not fsynced, as `save`) and delete the scratch file."""
        self._fh.close()
        dtype = self.dtype if not self.count else _narrowest(self._lo, self._hi, self.dtype)
        header = {
            "descr": np.lib.format.dtype_to_descr(dtype),
            "fortran_order": False,
            "shape": (self.count,),
        }
        with open(self.scratch, "rb") as src, open(path, "wb", opener=private) as fh:
            np.lib.format.write_array_header_1_0(fh, header)
            while chunk := src.read(_SAVE_CHUNK * self.dtype.itemsize):
                fh.write(np.frombuffer(chunk, dtype=self.dtype).astype(dtype, copy=False).data)
        os.unlink(self.scratch)
