"""tests/test_slices.py against a Ray-backed node (conftest.py says how)."""

from test_slices import *  # noqa: F403
