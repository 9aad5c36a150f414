"""CPU of a search worker's segment build and of a merge, per document, in one process, and the
memory of the build.

    python -m bench.segment_build                 # buffers of 25,000 bench documents, 8 merged
    python -m bench.segment_build --docs 25000 --parts 8 --repeat 5

A build: the bench documents parsed by column (`parse_batch`, as the server does), added to an
`IndexBuffer`, packed and pickled as the server sends it to a worker; the figure is what the worker
then spends (`pickle.loads`, `PackedBuffer.unpack`, `segment_from_buffer`, files fsynced), best of
`--repeat`. A merge: `--parts` such segments merged into one (`merge_segments`, as the merge
worker does). CPU of this process (`time.process_time`), so the load of a shared machine moves it
less than wall time; compare two trees by running it from each (`git archive` one to a folder and
put that folder on `PYTHONPATH`), interleaved.

The build's memory (`tracemalloc`, which counts numpy's arrays too): the job as it arrives in a
worker (`BuildJob`, unpickled), the traced peak while the worker runs it, and what is still
traced once it returned while the worker's thread still holds the job's callable, as
search/workers/process.py does until it has replied.
"""

from __future__ import annotations

import argparse
import gc
import pickle
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench.generate import MAPPING, generate
from leafsearch.index.buffer import IndexBuffer
from leafsearch.index.buffer_wire import BuildJob, PackedBuffer
from leafsearch.index.mapping import Mapping
from leafsearch.index.mapping_batch import parse_batch
from leafsearch.index.segment import Segment
from leafsearch.index.segment_build import merge_segments, segment_from_buffer


def packed_buffers(docs: int, parts: int) -> list[bytes]:
    """`parts` pickled packed buffers of `docs` bench documents each."""
    dataset = generate(docs * parts)
    mapping = Mapping.from_body(MAPPING)
    out = []
    for part in range(parts):
        lo, hi = part * docs, (part + 1) * docs
        sources = [source.encode() for source in dataset.sources[lo:hi]]
        batch = parse_batch(mapping, sources)
        assert batch is not None
        buffer = IndexBuffer()
        rows = list(range(docs))
        buffer.add_batch(batch, rows, dataset.ids[lo:hi], list(range(lo, hi)), [1] * docs, [None] * docs)
        out.append(pickle.dumps(PackedBuffer.pack(buffer), protocol=5))
    return out


def build_memory(blob: bytes, folder: Path) -> tuple[int, int, int]:
    """(bytes traced once the job arrived, the peak while it ran, what is left after it) of a
    worker's build of the packed buffer `blob` into `folder`."""
    tracemalloc.start()
    try:
        job = BuildJob(pickle.loads(blob), str(folder), None)
        work = job.bind(None)
        del job
        arrived = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        work()
        left, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return arrived, peak, left


def _cpu(work) -> float:
    start = time.process_time()
    work()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--docs", type=int, default=25_000, help="documents per buffer")
    parser.add_argument("--parts", type=int, default=8, help="segments merged")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    gc.set_threshold(100_000, 50, 100)  # the server's and workers' settings (cli.py)
    blobs = packed_buffers(args.docs, args.parts)
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        builds = []
        for rep in range(args.repeat):
            for part, blob in enumerate(blobs if rep == 0 else blobs[:1]):
                target = root / f"b{rep}-{part}"

                def build(blob: bytes = blob, target: Path = target) -> None:
                    segment_from_buffer(pickle.loads(blob).unpack(), target)

                builds.append(_cpu(build))
        arrived, peak, left = build_memory(blobs[0], root / "traced")
        merges = []
        for rep in range(args.repeat):
            parts = [(Segment(root / f"b0-{part}"), None) for part in range(args.parts)]
            merges.append(_cpu(lambda parts=parts, rep=rep: merge_segments(parts, root / f"m{rep}")))
    build_us = min(builds) / args.docs * 1e6
    print(f"build of {args.docs:,} documents: {build_us:.2f} us/doc (best of {len(builds)})")
    mb = 1 << 20
    print(
        f"a worker's build job: {arrived / mb:.1f} MB as it arrives, traced peak {peak / mb:.1f} MB, "
        f"{left / mb:.1f} MB left while its callable is held"
    )
    merge_us = min(merges) / (args.docs * args.parts) * 1e6
    print(f"merge of {args.parts} x {args.docs:,} documents: {merge_us:.2f} us/doc (best of {len(merges)})")


if __name__ == "__main__":
    main()
