"""What the in-process worker benches share (`bench.scroll_batches`, `bench.walk_pages`): a `Node`
on a folder `bench.streams` built, the targets of a request over it, and their command line."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from leafsearch import Node
from leafsearch.request.search_types import SearchRequest
from leafsearch.search import phases
from leafsearch.search.services import CoordinatorServices
from leafsearch.search.targets import Target, release_targets


@contextmanager
def searched(data: Path, request: SearchRequest) -> Iterator[tuple[CoordinatorServices, list[Target]]]:
    """A `Node` on `data` (no background threads) and the targets `request` resolves to, held
    for the block."""
    with Node(data, background=False) as node:
        services = node.search_services
        targets = phases.resolve_targets(services, request)
        try:
            yield services, targets
        finally:
            release_targets(targets)


def arguments(description: str, count: str, *, sliced: bool = False) -> argparse.Namespace:
    """`--data`, `--repeat` and `--<count>` (how many pages or batches a walk runs); `sliced`:
    `--slice ID/MAX` too (the walk's slice by `_id`)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument(f"--{count}", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    if sliced:
        parser.add_argument("--slice", help="ID/MAX: walk slice ID of MAX (by `_id`), not every document")
    return parser.parse_args()
