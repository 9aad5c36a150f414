"""The test modules' assertion rewriting shared out among the xdist workers of a first run, and
the bytecode of the packages the suite's processes import written once before they start.

pytest rewrites each test module's `assert`s as it imports it and keeps the result in the module's
`__pycache__` (a `-pytest-` pyc beside the plain one) for later runs. In a fresh checkout every
xdist worker collects every module at the same moment, so each rewrote all of them: about 7 s of
CPU per worker of the 13 s its collection took (bench/RESULTS.md "The test suite", "Session 19").
Here, before collecting, each worker rewrites and caches its share of the modules not cached yet
(every `workercount`-th from its own), so that the collection finds most of them written by
another worker, and the next run finds all of them. The code is pytest's own
(`_pytest.assertion.rewrite`, as its import hook calls it); a pytest without those functions
leaves the collection to do it all, as before.

The suite starts some hundreds of processes that import the package: servers and their zygotes,
Ray coordinators and machine actors (again at each restart) and their merge workers, CLI and bench
runs. Where `PYTHONDONTWRITEBYTECODE` is set (these sessions' environment) and the checkout has no
`__pycache__`, each of them compiled every module it imports (0.4 s of CPU more for a server's
start, 0.6 s to compile the whole package once): `compile_packages` writes the cache at the run's
start, which an import reads whatever that variable says (bench/RESULTS.md "The test suite",
"Session 20").
"""

from __future__ import annotations

import compileall
import os
from collections.abc import Iterable
from pathlib import Path

import pytest

#: Folders never searched for test modules (pytest's default `norecursedirs` among them: the
#: external tools' virtual environment and `node_modules`).
SKIPPED_FOLDERS = ("node_modules", "venv", "__pycache__", "build", "dist")
#: The folders of the modules the suite's processes import, from the repository root; in `tests`,
#: the helpers (the test modules are pytest's to rewrite: `rewrite_share`).
PACKAGES = ("leafsearch", "bench", "pytest_leafsearch", "tests")


def find_test_modules(roots: Iterable[Path]) -> list[Path]:
    """The `test_*.py` files under `roots` (folders or files), sorted, outside hidden and skipped
    folders."""
    found: set[Path] = set()
    for root in roots:
        if root.is_file():
            found.add(root)
            continue
        for path in root.rglob("test_*.py"):
            parts = path.relative_to(root).parts[:-1]
            if not any(part.startswith(".") or part in SKIPPED_FOLDERS for part in parts):
                found.add(path)
    return sorted(path for path in found if path.name.startswith("test_") and path.suffix == ".py")


def compile_packages(repo: Path) -> None:
    """Writes the bytecode cache of the modules of `PACKAGES` (those in hidden and skipped folders
    left out) where it is missing or stale: `compileall` writes it even under
    `PYTHONDONTWRITEBYTECODE`, and reads the header of a current one only. Silent: a module that
    does not compile fails its tests, and one in a folder not writable is compiled by each process
    that imports it, as before."""
    for package in PACKAGES:
        for folder, subfolders, files in os.walk(repo / package):
            subfolders[:] = [f for f in subfolders if not f.startswith(".") and f not in SKIPPED_FOLDERS]
            for name in files:
                if name.endswith(".py") and not (package == "tests" and name.startswith("test_")):
                    compileall.compile_file(os.path.join(folder, name), quiet=2)


def rewrite_share(config: pytest.Config, modules: list[Path], worker: int, workers: int) -> int:
    """Rewrites and caches every `workers`-th module of `modules` from the `worker`-th, unless
    cached already; how many it wrote (also under `PYTHONDONTWRITEBYTECODE`, where pytest writes
    none itself but reads them: else every worker of every run rewrote every module, 46-49 s of
    CPU for a collection in 3 workers against 13-14 s). Nothing when pytest lacks the functions."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return 0
    needed = ("PYC_TAIL", "_read_pyc", "_rewrite_test", "_write_pyc", "assertstate_key", "get_cache_dir")
    if not all(hasattr(rewrite, name) for name in needed):
        return 0
    state = config.stash.get(rewrite.assertstate_key, None)
    if state is None:  # --assert=plain
        return 0
    written = 0
    for module in modules[worker::workers]:
        cache = rewrite.get_cache_dir(module)
        pyc = cache / (module.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(module, pyc, state.trace) is not None:
            continue
        try:
            source_hash, code = rewrite._rewrite_test(module, config)
            cache.mkdir(exist_ok=True)
        except (OSError, SyntaxError):  # the collection reports it
            continue
        if rewrite._write_pyc(state, code, source_hash, pyc):
            written += 1
    return written
