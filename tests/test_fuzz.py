"""A seeded fuzzer over every endpoint of the route table, against a real server process.

Requests (bench/fuzz/) are drawn from every route of `leafsearch.rest.routes.ROUTES`: malformed and
truncated JSON, wrong types, NaN, huge and negative numbers, deep nesting, long strings, bad time
values, forged scroll and PIT ids, bad index names (NUL, `#`, `:`, 256 bytes...), bad bulk lines,
unknown parameters, valid search, aggregation and bulk bodies with one value mutated, and heavy
inputs: `terms` lists of 100,000 values, `match` texts of 2 MB, up to 100,000 sort keys or
aggregations, documents with up to 100,000 new fields, mapping parameters (fields, runtime fields,
dynamic templates) of any type, and headers up to 1 MiB. The test passes when no answer is a 5xx,
every error body has Elasticsearch's shape (`error.type`, `error.reason`, `error.root_cause`, and
a `status` equal to the HTTP status), an oversized head gets a 400 (or its connection closed), the
server still answers, and the control index is unchanged.

The control index is created first with known documents. Only requests that cannot change an index
may name it (searches, counts, gets, PITs, refreshes, listings); every request that can write
(document, bulk and by-query writes, index creation and deletion, mappings, settings) names only
the fuzz indices (`fuzz-*`) or invalid names, never a wildcard or `_all` that could reach the
control index. So an unchanged control index shows that reads change nothing and that a write
refused or aimed elsewhere does not leak into another index.

`LEAFSEARCH_FUZZ_REQUESTS` (default 3000) sets the number of requests and `LEAFSEARCH_FUZZ_SEED`
the seed (printed with every failure, with a reproducer of each distinct 5xx). The run under a
memory cap, with the server's memory and each request's time measured, is
`python -m bench.fuzz_memory` (bench/RESULTS.md).
"""

from __future__ import annotations

import os
import random
import resource
from pathlib import Path

import pytest
from conftest import running_server

from bench.fuzz.requests import Fuzzer
from bench.fuzz.run import load_control, run, snapshot
from tests import web

SEED = int(os.environ.get("LEAFSEARCH_FUZZ_SEED", "20240807"))
REQUESTS = int(os.environ.get("LEAFSEARCH_FUZZ_REQUESTS", "3000"))
#: The server's address space: a request that would allocate without bound fails (and is reported)
#: instead of taking the machine down.
SERVER_MEMORY_LIMIT = 3 * 1024**3
#: A single request answering later than this is a stalled server.
REQUEST_TIMEOUT = 30.0


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (SERVER_MEMORY_LIMIT, SERVER_MEMORY_LIMIT))


@pytest.mark.timeout(900)
def test_fuzzed_requests_get_elasticsearch_answers_and_change_nothing_else(tmp_path: Path) -> None:
    with (
        running_server(tmp_path / "data", preexec_fn=limit_memory) as (url, process),
        web.Client(base_url=url, timeout=REQUEST_TIMEOUT) as http,
    ):
        before = load_control(http)
        findings = run(http, Fuzzer(random.Random(SEED)), REQUESTS)
        alive = process.poll() is None and http.get("/").status_code == 200
        after = snapshot(http) if alive else None

    problems = findings.problems(REQUEST_TIMEOUT)
    if not alive:
        problems.append("the server is down after the run")
    elif after != before:
        changed = [key for key in before if before[key] != after[key]]
        problems.append(f"the control index changed: {changed}: {str({k: after[k] for k in changed})[:2000]}")
    header = f"seed {SEED}, {REQUESTS} requests (LEAFSEARCH_FUZZ_SEED, LEAFSEARCH_FUZZ_REQUESTS)"
    assert not problems, "\n".join([header, *problems])
