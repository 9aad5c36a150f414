"""The ordered part of a raw `_bulk`: CPU of the request thread per document, in process.

    python -m bench.bulk_thread                   # 100,000 bench documents, bodies of 5,000
    python -m bench.bulk_thread --docs 200000 --repeat 3

A `Client` on a temporary folder (`background=False`: no refresh timer; segments are written by
the flush thread, merges by the merge worker) indexes the bench documents as raw NDJSON bodies
into the bench mapping; the figure is the CPU time of the calling thread (`time.thread_time`)
over the bulk calls, per document: what the server process's request thread spends (splitting,
parsing, ids, versions, translog, buffer, items), without HTTP and without the work that needs
no order (segment builds). On a machine shared with other runs, where wall-clock and per-process
CPU figures move with the load (a slower load refreshes more often per document), this figure
moves least: compare two trees by running it from each (`git archive` one to a folder and put
that folder on `PYTHONPATH`), interleaved.
"""

from __future__ import annotations

import argparse
import gc
import tempfile
import time

from bench.generate import MAPPING, generate
from leafsearch.client import Client

BODY_DOCS = 5_000


def request_thread_us(docs: int) -> float:
    """us of request-thread CPU per document for one load of `docs` documents."""
    bodies = generate(docs).bulk_bodies(BODY_DOCS)
    gc.collect()
    gc.freeze()  # as the server does at start (cli.py), so earlier garbage is not rescanned
    with tempfile.TemporaryDirectory() as folder:
        client = Client(folder, background=False)
        try:
            client.indices.create(index="bulk", mappings=MAPPING)
            spent = 0.0
            for body in bodies:
                start = time.thread_time()
                response = client.bulk(body, index="bulk")
                spent += time.thread_time() - start
                if response["errors"]:
                    raise RuntimeError("a bulk request reported errors")
        finally:
            client.close()
    return spent / docs * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    gc.set_threshold(100_000, 50, 100)  # the server's settings (cli.py)
    for _ in range(args.repeat):
        print(f"request thread: {request_thread_us(args.docs):.2f} us/doc")


if __name__ == "__main__":
    main()
