"""tests/search/test_search_after.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_search_after import *  # noqa: F403
