"""The standard analyzer: what a text value is indexed as, and the positions of multi-valued fields."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leafsearch.index.analysis import MAX_TOKEN_LENGTH, analyze, analyze_with_positions


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("The Quick  BROWN fox!", ["the", "quick", "brown", "fox"]),
        ("GET /api/v1/users?id=42", ["get", "api", "v1", "users", "id", "42"]),
        ("e-mail: foo_bar", ["e", "mail", "foo_bar"]),
        ("", []),
        ("  ... --- ", []),
    ],
)
def test_words_are_split_on_punctuation_and_lowercased(text: str, tokens: list[str]) -> None:
    assert analyze(text) == tokens


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Don't stop", ["don't", "stop"]),
        ("'quoted' words", ["quoted", "words"]),
        ("pi is 3.14, about", ["pi", "is", "3.14", "about"]),
        ("1,000,000 rows", ["1,000,000", "rows"]),
        ("U.S.A. and example.com", ["u.s.a", "and", "example.com"]),
        ("version v1.2", ["version", "v1.2"]),
        ("abc.123 a,b a;b 1;2", ["abc", "123", "a", "b", "a", "b", "1;2"]),
        ("end of sentence. Next", ["end", "of", "sentence", "next"]),
    ],
)
def test_joiners_are_kept_only_between_letters_or_between_digits(text: str, tokens: list[str]) -> None:
    """UAX#29: `'`, `.` and `:` join letters; `.`, `,`, `;` and `'` join digits."""
    assert analyze(text) == tokens


def test_unicode_words_marks_and_ideographs() -> None:
    assert analyze("Café Ünïcödé हिन्दी 한국어") == ["café", "ünïcödé", "हिन्दी", "한국어"]
    # Each ideograph and Hiragana character is a token; Katakana forms words.
    assert analyze("東京タワー ひらがな") == ["東", "京", "タワー", "ひ", "ら", "が", "な"]
    assert analyze("it’s") == ["it’s"]


def test_tokens_longer_than_max_token_length_are_split() -> None:
    tokens = analyze("x" * 600 + " y")
    assert [len(t) for t in tokens] == [MAX_TOKEN_LENGTH, MAX_TOKEN_LENGTH, 600 - 2 * MAX_TOKEN_LENGTH, 1]


@given(st.text(alphabet="ab1_ '.,:;-/\t\nZ", max_size=30))
def test_ascii_text_tokenizes_the_same_next_to_non_ascii(text: str) -> None:
    """The ASCII fast path and the Unicode expression agree: a non-ASCII word added at the end
    (which sends the value through the Unicode path) only adds its own token."""
    assert analyze(text + " é") == analyze(text) + ["é"]


def test_positions_of_one_value_count_from_zero() -> None:
    assert analyze_with_positions(["one two three"]) == (["one", "two", "three"], [0, 1, 2])


def test_positions_jump_by_the_gap_between_values() -> None:
    """Lucene's position_increment_gap (100): a phrase cannot match across two array elements."""
    assert analyze_with_positions(["a b", "c"]) == (["a", "b", "c"], [0, 1, 102])
    assert analyze_with_positions(["a", "", "b"]) == (["a", "b"], [0, 201])
    assert analyze_with_positions(["a", "b"], gap=0) == (["a", "b"], [0, 1])
