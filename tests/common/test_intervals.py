"""`common.intervals.one_interval` against a search per value: the one interval holding every
value, or None when the values span several (empty intervals among them) or there are none."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from leafsearch.common.intervals import one_interval


@given(
    st.lists(st.integers(0, 50), max_size=6).map(lambda rest: [0, *sorted(rest)]),
    st.lists(st.integers(0, 80), max_size=12),
)
def test_one_interval_is_the_interval_every_value_falls_in(starts: list[int], values: list[int]) -> None:
    each = np.searchsorted(np.array(starts), np.array(values, dtype=np.int64), side="right") - 1
    found = one_interval(starts, np.array(values, dtype=np.int64))
    if not values or len(set(each.tolist())) > 1:
        assert found is None
    else:
        assert found == each[0]
