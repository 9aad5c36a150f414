"""What tests/index/test_derived_files.py's racing writer processes run. Apart from the test module
so that each spawned writer imports numpy and the order files' module alone, not the test module
and with it the engine and the suite's fixtures (about 0.4 s of CPU a process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from leafsearch.index import order_files
from leafsearch.index.order_files import StoredOrder


def write_many(path: str, source: str, rounds: int, start: Any) -> None:
    """A process writing one order file again and again (what racing workers do)."""
    with np.load(source) as arrays:
        stored = StoredOrder(arrays["order"], arrays["rank"], [arrays["key0"]], [False], [None])
        start.wait()
        for _ in range(rounds):
            order_files.write(Path(path), stored)
