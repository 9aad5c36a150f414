"""Import every module of the `leafsearch` package now, so that none is imported later.

Many modules are imported where they are first used (so that `leafsearch serve` answers quickly
and `leafsearch --help` stays quick). A server that ran for a while and is then asked for a feature
it never used would import that module from whatever the installation holds by then: after the
package was reinstalled beside it (`pip install` of another version, or of the same checkout as an
editable install), the files it expects may have moved or changed, and the request would fail
with a `ModuleNotFoundError`. So a server imports the whole package once it serves (`cli.py`),
in a background thread, and each search worker process imports what a worker can run before it
reports itself ready (`search/workers/entry.py`: not the HTTP front, the node, the command line
or the clients, which would cost each worker some 15 MB).

Left out: the `__main__` modules (importing one runs the command line) and the Ray backend unless
Ray is already imported (only `--ray` uses it, and importing Ray is slow and large). A module that
fails to import (an optional dependency missing) is skipped and logged at debug level: the
request that needs it reports the error as it would have.
"""

from __future__ import annotations

import importlib
import logging
import os
import pkgutil
import sys
import time

log = logging.getLogger("leafsearch.preload")

#: Subpackages imported only when their third-party dependency is already loaded.
_OPTIONAL = {"leafsearch.ray_backend": "ray"}


def module_names(package: str = "leafsearch") -> list[str]:
    """The package's modules and subpackages, by name, found on disk (only `package` itself is
    imported, to find its folder)."""
    names: list[str] = []

    def walk(paths: list[str], prefix: str) -> None:
        for info in pkgutil.iter_modules(paths, prefix):
            names.append(info.name)
            if info.ispkg:
                walk([os.path.join(info.module_finder.path, info.name.rsplit(".", 1)[-1])], f"{info.name}.")

    walk(list(importlib.import_module(package).__path__), f"{package}.")
    return names


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def wanted(name: str, exclude: tuple[str, ...] = ()) -> bool:
    """Whether `preload` imports module `name` (given the packages it leaves out)."""
    if name.rsplit(".", 1)[-1] == "__main__" or any(_within(name, package) for package in exclude):
        return False
    return all(
        not _within(name, package) or dependency in sys.modules for package, dependency in _OPTIONAL.items()
    )


def preload(package: str = "leafsearch", exclude: tuple[str, ...] = ()) -> tuple[int, float]:
    """Import every module of `package` but those in the `exclude`d subpackages (and modules);
    (modules newly imported, seconds taken)."""
    started = time.perf_counter()
    before = len(sys.modules)
    for name in module_names(package):
        if name in sys.modules or not wanted(name, exclude):
            continue
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - an optional dependency missing: used lazily later
            log.debug("not preloaded: %s (%s: %s)", name, type(exc).__name__, exc)
    return len(sys.modules) - before, time.perf_counter() - started
