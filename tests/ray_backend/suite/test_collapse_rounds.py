"""tests/search/test_collapse_rounds.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_collapse_rounds import *  # noqa: F403
