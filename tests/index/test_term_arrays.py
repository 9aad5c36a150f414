"""`segment.to_term_array`: ids and terms as the 'S' array the segments compare and sort, the same
whichever way it is made (ASCII strings of one width by one join, others one by one)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from leafsearch.index.segment import fixed_width_terms, to_term_array


def one_by_one(values: list[str]) -> np.ndarray:
    return np.array([value.encode() for value in values], dtype=bytes)


@given(st.lists(st.text(alphabet="ab\x00\x7f\u00e9:", max_size=3), min_size=1, max_size=8))
def test_terms_of_any_widths_and_characters(values: list[str]) -> None:
    got, want = to_term_array(values), one_by_one(values)
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


@given(st.integers(1, 12), st.lists(st.integers(0, 10**12), min_size=1, max_size=50))
def test_ids_of_one_width(width: int, numbers: list[int]) -> None:
    values = [str(number).zfill(width)[-width:] for number in numbers]
    got, want = to_term_array(values), one_by_one(values)
    assert got.dtype == want.dtype == np.dtype(f"S{width}")
    assert got.tolist() == want.tolist()
    assert np.array_equal(np.sort(got), np.sort(want))


def test_widths_that_add_up_as_one_width_would() -> None:
    # the total length of three 2-character ids, NULs where a join puts its separators
    for values in (["ab", "a", "abc"], ["a", "", "\x00b"], ["a\x00", "b", "c\x00"]):
        got, want = to_term_array(values), one_by_one(values)
        assert got.dtype == want.dtype
        assert got.tolist() == want.tolist()


@given(st.lists(st.text(alphabet="ab\x00\x7f\u00e9:", max_size=3), min_size=1, max_size=8))
def test_strings_joined_by_nul_as_they_cross_to_a_worker(values: list[str]) -> None:
    """`fixed_width_terms` of the joined strings is `to_term_array`'s array exactly when they are
    ASCII, of one width of at least a character and without NUL; else None."""
    got = fixed_width_terms("\x00".join(values), len(values))
    width = len(values[0])
    one_width = width > 0 and all(len(v) == width and v.isascii() and "\x00" not in v for v in values)
    assert (got is not None) == one_width
    if got is not None:
        want = one_by_one(values)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
