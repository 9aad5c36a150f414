"""The pickles of shard messages and answers (common/wire_pickle.py): what loads is equal to what
was dumped, of the same types, its arrays writable with their dtypes; a flat numeric or bytes
array loads by `numpy.frombuffer` and a `ByFields` dataclass by its class, not by numpy's or the
dataclass's own pickling; a class the call would not rebuild is refused. `evolve` makes what
`dataclasses.replace` makes, for the classes a walk copies per page."""

from __future__ import annotations

import dataclasses
import io
import pickle
from dataclasses import dataclass, field

import numpy as np
import pytest

from leafsearch.common.wire_pickle import ByFields, dumps, evolve
from leafsearch.request.search_request import parse_search_request
from leafsearch.search.shard_api import FetchAlong, FetchedPage, ShardFetchResult, ShardQuery, ShardTopDocs
from leafsearch.search.sort_keys import SortColumn
from leafsearch.search.top_hits import sort_plan


def _globals(data: bytes) -> list[str]:
    """The names a pickle looks up as it loads (its reconstructors and classes)."""
    names: list[str] = []

    class Recording(pickle.Unpickler):
        def find_class(self, module: str, name: str) -> object:
            names.append(f"{module}.{name}")
            return super().find_class(module, name)

    Recording(io.BytesIO(data)).load()
    return names


ARRAYS = [
    np.arange(5, dtype=np.int64),
    np.array([1.5, -2.0], np.float32),
    np.array([b"ab", b"c"]),
    np.empty(0, "S1"),
    np.zeros(3, bool),
    np.array([7, 8], ">u2"),
    np.arange(6).reshape(2, 3),  # (numpy's own: not flat)
    np.arange(10)[::2],  # (numpy's own: not contiguous)
    np.array(["x", None], object),  # (numpy's own: objects)
]


@pytest.mark.parametrize("array", ARRAYS, ids=lambda a: f"{a.dtype.str}-{a.shape}")
def test_an_array_loads_equal_writable_and_of_its_dtype(array: np.ndarray) -> None:
    data = dumps(array)
    loaded = pickle.loads(data)
    assert type(loaded) is np.ndarray and loaded.dtype == array.dtype and loaded.shape == array.shape
    assert loaded.tolist() == array.tolist() and loaded.flags.writeable
    flat = array.ndim == 1 and array.flags.c_contiguous and array.dtype.kind in "biufS"
    assert ("numpy.frombuffer" in _globals(data)) == flat


def test_a_query_phase_message_and_answer_load_equal_by_their_classes() -> None:
    body = {"query": {"term": {"k": "a"}}, "size": 3, "sort": [{"n": "desc"}, "k"]}
    request = parse_search_request(body, {})
    plan = sort_plan(request, [])
    query = ShardQuery(request, 2, 123, plan, False, fetch=FetchAlong(True, True, targets=6, candidates=True))
    columns = [
        SortColumn(plan.specs[0], "long", np.array([9, 7], np.int64), None),
        SortColumn(
            plan.specs[1], "keyword", np.array([1, 0]), np.array([True, False]), np.array([b"a", b"c"]), ()
        ),
    ]
    page = FetchedPage(0, 2, "hits", ShardFetchResult(2, None, [b'{"_id":"x"},', b'{"_id":"y"},'], 5))
    top = ShardTopDocs(2, 40, None, np.array([4, 1], np.int32), None, columns, page=page)
    data = dumps([query, (None, top)])
    loaded_query, (_, loaded) = pickle.loads(data)
    assert loaded_query == query
    assert loaded.docs.tolist() == [4, 1] and loaded.docs.dtype == np.int32 and loaded.page == page
    assert [(c.spec, c.kind, c.values.tolist(), c.terms) for c in loaded.columns[:1]] == [
        (plan.specs[0], "long", [9, 7], None)
    ]
    keyword = loaded.columns[1]
    assert keyword.present.tolist() == [True, False] and keyword.terms.tolist() == [b"a", b"c"]
    assert (loaded.shard_index, loaded.total, loaded.max_score, loaded.agg_partials) == (2, 40, None, [])
    names = _globals(data)
    assert "leafsearch.search.shard_api.ShardTopDocs" in names and "copyreg.__newobj__" not in names
    assert not any(name.startswith("numpy._core") for name in names)  # (every array flat)


def test_evolve_makes_what_replace_makes() -> None:
    request = parse_search_request(
        {"sort": ["_doc"], "size": 7, "slice": {"id": 0, "max": 2}}, {}, scroll="1m", indices="i"
    )
    changes = {"search_after": [3, 9], "track_total_hits": False, "from_": 0}
    evolved = evolve(request, **changes)
    assert evolved == dataclasses.replace(request, **changes) and type(evolved) is type(request)
    assert (evolved.search_after, evolved.track_total_hits) == ([3, 9], False)
    assert request.search_after is None and request.track_total_hits == 10_000  # the original kept
    assert evolved.sort is request.sort  # shallow, as `replace` is

    @dataclass(frozen=True, slots=True)
    class Frozen:
        a: int
        b: list = field(default_factory=list)

    frozen = Frozen(1, [2])
    assert evolve(frozen, a=5) == dataclasses.replace(frozen, a=5) == Frozen(5, [2])
    assert evolve(frozen) == frozen and evolve(frozen) is not frozen
    with pytest.raises(TypeError, match="no field 'c'"):
        evolve(frozen, c=1)


def test_evolve_refuses_a_class_its_call_would_not_rebuild() -> None:
    @dataclass
    class Checked:
        n: int

        def __post_init__(self) -> None:
            self.n = abs(self.n)

    with pytest.raises(TypeError, match="is not rebuilt by its __init__ from its fields"):
        evolve(Checked(-1), n=2)


def test_a_dataclass_its_call_would_not_rebuild_is_refused() -> None:
    @dataclass
    class Counted(ByFields):
        n: int
        seen: int = field(init=False, default=0)

    @dataclass
    class Checked(ByFields):
        n: int

        def __post_init__(self) -> None:
            self.n = abs(self.n)

    for value in (Counted(1), Checked(-1)):
        with pytest.raises(TypeError, match="is not rebuilt by its __init__ from its fields"):
            dumps(value)
