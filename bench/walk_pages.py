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

import dataclasses
import time
from pathlib import Path

from bench.in_process import arguments, searched
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import execution, walks
from leafsearch.search.execution import PitTask

PAGE = 1_000


def page_cpu_ms(data: Path, pages: int, repeat: int) -> float:
    """ms of CPU per page of 1,000 hits, the best of `repeat` walks of `pages` pages."""
    body = {"size": PAGE, "sort": [{"@timestamp": "desc"}], "track_total_hits": False}
    request = parse_search_request(body, {}, indices="bench")
    walk = walks.identity(request)
    with searched(data, request) as (services, targets):
        best = float("inf")
        for ctx_id in range(1, repeat + 1):  # each walk its own context: nothing read ahead yet
            cursor = None
            start = time.process_time()
            for _ in range(pages):
                asked = dataclasses.replace(request, search_after=cursor)
                task = PitTask(targets, asked, 0.0, True, ctx_id, "bench", walk=walk)
                _, ahead = execution._pit_page(services, task, None)
                cursor = ahead()
                if cursor is None:
                    raise SystemExit(f"the walk ended before {pages} pages")
            best = min(best, (time.process_time() - start) / pages * 1e3)
            services.contexts.read_ahead.forget(ctx_id)
    return best


def main() -> None:
    args = arguments(__doc__, "pages")
    spent = page_cpu_ms(args.data, args.pages, args.repeat)
    print(f"PIT walk page of {PAGE:,}: {spent:.3f} ms CPU")


if __name__ == "__main__":
    main()
