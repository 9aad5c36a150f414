"""tests/search/test_scroll_property.py against a Ray-backed node (conftest.py says how)."""

from tests.search.test_scroll_property import *  # noqa: F403
