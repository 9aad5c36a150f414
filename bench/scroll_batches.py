"""A `_doc` scroll's batches as a search worker runs them, in process: CPU per 1,000 documents.

    python -m bench.scroll_batches --data /tmp/streams/d1m            # a folder bench.streams built
    python -m bench.scroll_batches --data /tmp/streams/d1m --batches 300 --repeat 3
    python -m bench.scroll_batches --data /tmp/streams/d1m --slice 0/2  # a hash slice's batches

A `Node` on `--data` (`background=False`) runs `--batches` batches of 1,000 of a `_doc` scroll
of index `bench` from its start with `execution.run` (the task a worker runs, without its socket
write, the server's note or the read-ahead thread): finding the batch among the live documents,
the ends of the batches after it that the scroll's record names, and the batch rendered to bytes.
The figure is the process's CPU time over the batches, the best of `--repeat` walks: on a shared
machine it moves least with the load; compare two trees by running it from each (`git archive`
one to a folder and put that folder on `PYTHONPATH`), interleaved.
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.in_process import arguments, searched
from leafsearch.request.search_request import parse_search_request
from leafsearch.search import execution
from leafsearch.search.execution import ScrollTask

PAGE = 1_000


def batch_cpu_ms(data: Path, batches: int, repeat: int, sliced: tuple[int, int] | None = None) -> float:
    """ms of CPU per 1,000 documents, the best of `repeat` walks of `batches` batches (of slice
    `sliced`, (id, max), when given)."""
    body: dict = {"sort": ["_doc"], "size": PAGE}
    if sliced is not None:
        body["slice"] = {"id": sliced[0], "max": sliced[1]}
    request = parse_search_request(body, {}, scroll="2m", indices="bench")
    with searched(data, request) as (services, targets):
        best = float("inf")
        for _ in range(repeat):
            cursor, total, docs = None, None, 0
            start = time.process_time()
            for _ in range(batches):
                opening = cursor is None
                task = ScrollTask(targets, request, 0.0, True, 1, "bench", cursor, total, opening, False)
                _, cursor, total, _ = execution.run(services, task)
                docs += min(PAGE, total - docs)
                if docs == total:  # the scroll's last batch
                    break
            best = min(best, (time.process_time() - start) / docs * 1e6)
    return best


def main() -> None:
    args = arguments(__doc__, "batches", sliced=True)
    sliced = None if args.slice is None else tuple(map(int, args.slice.split("/")))
    spent = batch_cpu_ms(args.data, args.batches, args.repeat, sliced)  # type: ignore[arg-type]
    shown = "" if args.slice is None else f", slice {args.slice}"
    print(f"_doc scroll batch{shown}: {spent:.3f} ms CPU per 1,000 docs")


if __name__ == "__main__":
    main()
