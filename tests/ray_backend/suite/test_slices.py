"""tests/search/test_slices.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_slices import *  # noqa: F403
