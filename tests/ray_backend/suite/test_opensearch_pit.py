"""tests/search/test_opensearch_pit.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_opensearch_pit import *  # noqa: F403
