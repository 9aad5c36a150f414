"""The fielddata registry: a text column is uninverted once, charged to the breaker before it is
built, refused whole over the limit (nothing held or charged), given back on clear and when its
segment goes."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

from leafsearch.common.settings import ClusterSettings
from leafsearch.errors import CircuitBreaking
from leafsearch.index.columns import TextColumn
from leafsearch.index.fielddata import Fielddata
from leafsearch.services.breaker import Breakers


def column() -> TextColumn:
    # terms a, b; docs 0 and 2 hold a, docs 1 and 2 hold b
    return TextColumn(
        terms=np.array([b"a", b"b"]),
        post_offsets=np.array([0, 2, 4]),
        post_docs=np.array([0, 2, 1, 2], dtype=np.int32),
        post_freqs=np.ones(4, dtype=np.int32),
        positions=np.zeros(4, dtype=np.int32),
        norms=np.ones(3, dtype=np.uint8),
        doc_count=3,
        sum_total_term_freq=4,
    )


@pytest.fixture
def breakers() -> Breakers:
    settings = ClusterSettings(None)
    settings.transient = {"indices.breaker.total.limit": "-1"}
    return Breakers(settings)


def test_a_column_is_built_once_and_charged_with_what_it_allocates(breakers: Breakers) -> None:
    fielddata = Fielddata(breakers)
    col = column()
    col.owner = (fielddata, "/shard/0", "msg")
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(col.fielddata)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(built) for built in seen}) == 1
    built = seen[0]
    assert np.asarray(built.ords.values).tolist() == [0, 1, 0, 1]  # doc 0: a; doc 1: b; doc 2: a, b
    assert breakers.fielddata_used == col.fielddata_nbytes() == fielddata.memory()["/shard/0"]
    fielddata.clear({"/other"})
    assert breakers.fielddata_used == col.fielddata_nbytes()
    fielddata.clear({"/shard/0"})
    assert breakers.fielddata_used == 0 and fielddata.memory() == {} and col.built_fielddata is None


def test_over_the_limit_nothing_is_built_or_charged(breakers: Breakers) -> None:
    breakers._settings.transient["indices.breaker.fielddata.limit"] = "10b"
    fielddata = Fielddata(breakers)
    col = column()
    col.owner = (fielddata, "/shard/0", "msg")
    with pytest.raises(CircuitBreaking) as tripped:
        _ = col.fielddata
    assert tripped.value.reason.startswith("[fielddata] Data too large, data for [msg] would be [")
    assert tripped.value.status == 429
    assert breakers.fielddata_used == 0 and breakers.fielddata_tripped == 1 and col.built_fielddata is None


def test_a_column_that_goes_gives_its_bytes_back(breakers: Breakers) -> None:
    fielddata = Fielddata(breakers)
    col = column()
    col.owner = (fielddata, "/shard/0", "msg")
    _ = col.fielddata
    assert breakers.fielddata_used > 0
    del col, _
    gc.collect()
    assert breakers.fielddata_used == 0 and fielddata.memory() == {}
