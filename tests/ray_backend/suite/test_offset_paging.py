"""tests/search/test_offset_paging.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_offset_paging import *  # noqa: F403
