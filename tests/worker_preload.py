"""Imported once by the fork server of the tests' in-process nodes (tests/conftest.py
`worker_processes`), before it forks their search and merge workers: what a search worker imports
before it is ready (leafsearch/search/workers/entry.py), as the zygote of `leafsearch serve`
imports it (leafsearch/search/workers/zygote.py)."""

from __future__ import annotations

from leafsearch.common.preload import preload
from leafsearch.search.workers.entry import NOT_IN_WORKERS

preload(exclude=NOT_IN_WORKERS)
