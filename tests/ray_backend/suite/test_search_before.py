"""tests/search/test_search_before.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_search_before import *  # noqa: F403
