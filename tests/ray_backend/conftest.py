"""Fixtures of the Ray backend's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.ray_backend.channel_child import Child


@pytest.fixture
def child() -> Iterator[Child]:
    """A machine actor's channel server alone, in a child process (SIGKILL ends it stopped or
    not)."""
    child = Child()
    child.start()
    yield child
    if child.process.is_alive():
        child.kill()
