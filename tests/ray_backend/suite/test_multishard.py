"""tests/search/test_multishard.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_multishard import *  # noqa: F403
