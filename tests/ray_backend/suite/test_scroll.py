"""tests/search/test_scroll.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_scroll import *  # noqa: F403
