"""`prefix_edit_distances` (the fuzzy completion's one dynamic program) against the distance to
each prefix computed one length at a time."""

from __future__ import annotations

import random

import numpy as np
import pytest

from leafsearch.search.query.fuzzy import edit_distances, prefix_edit_distances


@pytest.mark.parametrize("transpositions", [True, False])
def test_prefix_distances_equal_the_best_prefix_one_length_at_a_time(transpositions: bool) -> None:
    rng = random.Random(7)
    for _ in range(300):
        word = "".join(rng.choice("abc") for _ in range(rng.randint(0, 6)))
        candidates = ["".join(rng.choice("abc") for _ in range(rng.randint(0, 9))) for _ in range(20)]
        edits = rng.randint(0, 2)
        lengths = range(max(0, len(word) - edits), len(word) + edits + 1)
        every = np.array(
            [[edit_distances([c[:n]], word, transpositions)[0] for n in lengths] for c in candidates]
        )
        reachable = np.array([[len(c) >= n for n in lengths] for c in candidates])
        expected = np.where(reachable, every, np.iinfo(np.int64).max).min(axis=1)
        found = prefix_edit_distances(candidates, word, edits, transpositions)
        assert found.tolist() == expected.tolist(), (word, candidates, edits)
