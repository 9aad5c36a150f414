"""A PIT walk's pages as a search worker runs them, in process: CPU per page of 1,000 hits.

    python -m bench.walk_pages --data /tmp/streams/d1m            # a folder bench.streams built
    python -m bench.walk_pages --data /tmp/streams/d1m --pages 300 --repeat 3

A `Node` on `--data` (`background=False`) walks index `bench` by `@timestamp` desc in
`search_after` pages of 1,000 (`track_total_hits: false`), each page a `PitTask` run as a worker
runs a parked walk's page (the walk's identity known, hits rendered to bytes, the next page read
ahead on the read-ahead thread), without its socket write, the request's look and the note to the
server process. The figure is the process's CPU time (every thread: the read-ahead's render
included) over `--pages` pages from the walk's start, the best of `--repeat` walks: on a shared
machine it moves least with the load; compare two trees by running it from each (`git archive`
one to a folder and put that folder on `PYTHONPATH`), interleaved.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

from leafsearch import Node
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import execution, phases, walks
from leafsearch.search.execution import PitTask
from leafsearch.search.targets import release_targets

PAGE = 1_000


def page_cpu_ms(data: Path, pages: int, repeat: int) -> float:
    """ms of CPU per page of 1,000 hits, the best of `repeat` walks of `pages` pages."""
    with Node(data, background=False) as node:
        services = node.search_services
        body = {"size": PAGE, "sort": [{"@timestamp": "desc"}], "track_total_hits": False}
        request = parse_search_request(body, {}, indices="bench")
        targets = phases.resolve_targets(services, request)
        walk = walks.identity(request)
        try:
            best = float("inf")
            for ctx_id in range(1, repeat + 1):  # each walk its own context: nothing read ahead yet
                cursor = None
                start = time.process_time()
                for _ in range(pages):
                    asked = dataclasses.replace(request, search_after=cursor)
                    task = PitTask(targets, asked, 0.0, True, ctx_id, "bench", walk=walk)
                    _, cursor = execution._pit_page(services, task, None)
                    if cursor is None:
                        raise SystemExit(f"the walk ended before {pages} pages")
                best = min(best, (time.process_time() - start) / pages * 1e3)
                services.contexts.read_ahead.forget(ctx_id)
        finally:
            release_targets(targets)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--pages", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    spent = page_cpu_ms(args.data, args.pages, args.repeat)
    print(f"PIT walk page of {PAGE:,}: {spent:.3f} ms CPU")


if __name__ == "__main__":
    main()
