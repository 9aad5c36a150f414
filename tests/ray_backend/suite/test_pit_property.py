"""tests/search/test_pit_property.py against a Ray-backed node (conftest.py says how)."""

from collections.abc import Iterator

import pytest

import leafsearch
from tests.conftest import FakeClock
from tests.ray_cluster import LocalCluster
from tests.search.test_pit_property import *  # noqa: F403


@pytest.fixture(scope="module")
def node(
    tmp_path_factory: pytest.TempPathFactory, clock: FakeClock, ray_suite_cluster: LocalCluster
) -> Iterator[leafsearch.Node]:
    """The module's `node`, coordinating shard actors on the folder's Ray cluster (its PIT pages
    are top hits on the actors' contexts; search workers are not used with `ray=`)."""
    with leafsearch.Node(
        tmp_path_factory.mktemp("pit-node"), background=False, clock=clock, ray=ray_suite_cluster.address
    ) as instance:
        yield instance
        for name in list(instance.indices):
            instance.drop_index(name)
