"""W7: the first page of `match_all` sorted by `@timestamp` desc on a snapshot no query has seen.

Before each timed query one new document is written into the benchmark index and the index is
refreshed, so every query runs on a new snapshot (one new segment beside the old ones): what a log
dashboard does after each refresh. Only the query is timed (the refresh gets its own row). The new
documents are the newest (an hour after the dataset's last one, a second apart), so the i-th page
starts with the i new documents, newest first, then the dataset's newest: the check recomputes
that page and `_count` grows by one each time. The documents are deleted afterwards.
"""

from __future__ import annotations

import numpy as np

from bench.harness import Context, Recorder, Row, check, each_ms, p50_p99, time_each
from bench.workloads.common import count, extra_docs, future_ms, remove_extra_docs, search

SIZE = 100
WRITES = 30
BODY = {"size": SIZE, "sort": [{"@timestamp": "desc"}]}


def run(ctx: Context) -> list[Row]:
    rec = Recorder("W7")
    what = f"match_all by @timestamp desc after write + refresh, page of {SIZE}"
    p50 = rec.plan(f"{what}, p50", "ms", ("<=", 5.0))
    p99 = rec.plan(f"{what}, p99", "ms")
    refresh_p50 = rec.plan("the refresh of one new document, p50", "ms")
    sqlite = each_ms(lambda: ctx.sqlite.offset_page(0, SIZE) for _ in range(WRITES))
    rec.percentiles((p50, p99), sqlite, baseline=True)

    n = len(ctx.dataset)
    stamps = future_ms(ctx) + 1000 * np.arange(WRITES, dtype=np.int64)
    docs = extra_docs(ctx, n, stamps)
    newest = np.sort(ctx.dataset.ts_ms)[::-1][:SIZE].tolist()
    written: list[str] = []
    with rec.step(p50, p99, refresh_p50):
        try:
            search(ctx, BODY)  # the sort's orders of the dataset's segments exist before the loop
            query_ms: list[float] = []
            refresh_ms: list[float] = []
            for i, (doc_id, source) in enumerate(docs):
                ctx.http.raw("PUT", f"/{ctx.index}/_doc/{doc_id}", source.encode())
                written.append(doc_id)
                [(ms, _)] = time_each([lambda: ctx.http.raw("POST", f"/{ctx.index}/_refresh")])
                refresh_ms.append(ms)
                [(ms, response)] = time_each([lambda: search(ctx, BODY)])
                query_ms.append(ms)
                got = [hit["sort"][0] for hit in response["hits"]["hits"]]
                want = stamps[i::-1].tolist() + newest[: SIZE - i - 1]
                check(got == want, f"page after write {i + 1}: {got[:3]}... vs {want[:3]}...")
                check(
                    [hit["_id"] for hit in response["hits"]["hits"][: i + 1]] == written[::-1],
                    f"page after write {i + 1} does not start with the new documents, newest first",
                )
                check(count(ctx, ctx.index) == n + i + 1, f"_count is not {n + i + 1} after write {i + 1}")
            rec.percentiles((p50, p99), query_ms)
            rec.set(refresh_p50, p50_p99(refresh_ms)[0])
            rec.note(p50, f"{WRITES} snapshots")
        finally:
            if written:
                remove_extra_docs(ctx, written)
    return rec.finish()
