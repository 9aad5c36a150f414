"""Array files are opened through index/array_files.py alone (its lock keeps numpy's header
parsing, an `ast.literal_eval`, to one thread at a time: CPython 3.11's AST constructor state is
the whole interpreter's), and read back what was written, from many threads at once."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np

import leafsearch
from leafsearch.index import array_files

PACKAGE = Path(leafsearch.__file__).parent
#: What parses an array file's header outside the module (or any other literal with `ast`).
HEADER_PARSING = re.compile(r"\bnp\.load\(|\bnumpy\.load\(|\bliteral_eval\(|\bread_array\(")


def test_no_module_but_array_files_opens_an_array_file() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}:{n}"
        for path in PACKAGE.rglob("*.py")
        if path.name != "array_files.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if HEADER_PARSING.search(line)
    ]
    assert found == []


def test_arrays_read_back_from_many_threads_at_once(tmp_path: Path) -> None:
    arrays = {f"a{i}": np.arange(i * 1000, dtype=[np.int64, np.float32, np.uint8][i % 3]) for i in range(12)}
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
    np.savez(tmp_path / "all.npz", **arrays)
    failures: list[BaseException] = []

    def read() -> None:
        try:
            for _ in range(20):
                for name, array in arrays.items():
                    mapped = array_files.load(tmp_path / f"{name}.npy", mmap=True)
                    assert not mapped.flags.writeable and np.array_equal(mapped, array)
                    assert np.array_equal(array_files.load(tmp_path / f"{name}.npy"), array)
                every = array_files.load_all(tmp_path / "all.npz")
                assert every.keys() == arrays.keys()
                assert all(np.array_equal(every[k], v) for k, v in arrays.items())
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failures.append(exc)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
