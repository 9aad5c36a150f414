"""Date formats (parse and print, to the nanosecond) and date math, as Elasticsearch reads them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leafsearch.index.dates import (
    DEFAULT_DATE_FORMAT,
    DEFAULT_DATE_NANOS_FORMAT,
    MAX_NANOS,
    DateFormatter,
    parse_date_math,
)

DEFAULT = DateFormatter(DEFAULT_DATE_FORMAT)
NANOS = DateFormatter(DEFAULT_DATE_NANOS_FORMAT)
MAY_1 = 1_714_521_600_000  # 2024-05-01T00:00:00Z


@pytest.mark.parametrize(
    ("text", "millis"),
    [
        ("2024-05-01T12:34:56.789Z", MAY_1 + 45_296_789),
        ("2024-05-01T12:34:56Z", MAY_1 + 45_296_000),
        ("2024-05-01T12:34:56.7Z", MAY_1 + 45_296_700),
        ("2024-05-01T12:34:56.789999999Z", MAY_1 + 45_296_789),  # truncated to the millisecond
        ("2024-05-01T12:34:56,5Z", MAY_1 + 45_296_500),
        ("2024-05-01T12:34:56.789+02:00", MAY_1 + 45_296_789 - 7_200_000),
        ("2024-05-01T12:34:56-0130", MAY_1 + 45_296_000 + 5_400_000),
        ("2024-05-01T12:34", MAY_1 + 45_240_000),
        ("2024-05-01T12", MAY_1 + 43_200_000),
        ("2024-05-01", MAY_1),
        ("2024-05", MAY_1),
        ("2024", 1_704_067_200_000),
        ("1714521600000", MAY_1),
        (1_714_521_600_000, MAY_1),
        ("-1", -1),
    ],
)
def test_default_format_parses_iso_forms_and_epoch_millis(text: str | int, millis: int) -> None:
    assert DEFAULT.parse(text) == millis


def test_short_json_integers_are_years_as_in_elasticsearch() -> None:
    """strict_date_optional_time is tried first: 2024 is the year 2024, not 2024 ms after the epoch."""
    assert DEFAULT.parse(2024) == 1_704_067_200_000
    assert DEFAULT.parse(1_000_000_000) == 1_000_000_000


def test_dates_without_zone_are_utc() -> None:
    assert DEFAULT.parse("2024-05-01T12:34:56.789") == MAY_1 + 45_296_789


@pytest.mark.parametrize(
    "text",
    ["2024-13-01", "2024-02-30", "2024-05-01T24:00", "2024-5-1", "abc", "", "2024-W18-3T12:34:56.789Z"],
)
def test_invalid_dates_raise_a_message_naming_value_and_format(text: str) -> None:
    with pytest.raises(ValueError) as e:
        DEFAULT.parse(text)
    assert str(e.value) == f"failed to parse date field [{text}] with format [{DEFAULT_DATE_FORMAT}]"


def test_leap_days() -> None:
    assert DEFAULT.parse("2024-02-29") == 1_709_164_800_000
    with pytest.raises(ValueError):
        DEFAULT.parse("2023-02-29")


def test_non_strict_formats_accept_short_numbers() -> None:
    assert DateFormatter("date_optional_time").parse("2024-5-1") == MAY_1
    with pytest.raises(ValueError):
        DateFormatter("strict_date_optional_time").parse("2024-5-1")


def test_nanosecond_values_are_exact() -> None:
    assert NANOS.parse("2024-05-01T00:00:00.123456789Z", nanos=True) == MAY_1 * 10**6 + 123_456_789
    assert NANOS.parse("2262-04-11T23:47:16.854775807Z", nanos=True) == MAX_NANOS
    assert NANOS.parse("1600000000123.456", nanos=True) == 1_600_000_000_123_456_000
    assert NANOS.parse(1_600_000_000_123, nanos=True) == 1_600_000_000_123_000_000
    assert DEFAULT.parse("1600000000123.456") == 1_600_000_000_123


def test_printing() -> None:
    assert DEFAULT.format(1_704_067_200_000) == "2024-01-01T00:00:00.000Z"
    assert DEFAULT.format(-1) == "1969-12-31T23:59:59.999Z"
    assert NANOS.format(MAY_1 * 10**6 + 123_456_789, nanos=True) == "2024-05-01T00:00:00.123456789Z"
    assert NANOS.format(MAY_1 * 10**6 + 120_000_000, nanos=True) == "2024-05-01T00:00:00.120Z"
    assert DEFAULT.format(MAY_1 * 10**6 + 123_456_789, nanos=True) == "2024-05-01T00:00:00.123Z"
    assert DateFormatter("epoch_millis").format(1_704_067_200_000) == "1704067200000"
    assert DateFormatter("epoch_millis").format(1_600_000_000_123_456_000, nanos=True) == "1600000000123.456"
    assert DateFormatter("epoch_second").format(1_704_067_200_500) == "1704067200.5"
    assert DEFAULT.format(253_402_300_800_000) == "+10000-01-01T00:00:00.000Z"


def test_the_first_format_prints_and_any_parses() -> None:
    formatter = DateFormatter("yyyy/MM/dd HH:mm:ss||yyyy/MM/dd||epoch_millis")
    assert formatter.parse("2024/05/01") == MAY_1
    assert formatter.parse(str(MAY_1)) == MAY_1
    assert formatter.format(MAY_1 + 3_600_000) == "2024/05/01 01:00:00"


@pytest.mark.parametrize(
    ("pattern", "text", "millis", "printed"),
    [
        ("dd/MM/yyyy", "01/05/2024", MAY_1, "01/05/2024"),
        (
            "uuuu-MM-dd'T'HH:mm:ss.SSSXXX",
            "2024-05-01T02:00:00.250+02:00",
            MAY_1 + 250,
            "2024-05-01T00:00:00.250Z",
        ),
        ("yyyy-MM-dd HH:mm:ss Z", "2024-05-01 01:00:00 +0100", MAY_1, "2024-05-01 00:00:00 +0000"),
        ("yyyy-MM-dd[ HH:mm[:ss]]", "2024-05-01 10:11", MAY_1 + 36_660_000, "2024-05-01 10:11:00"),
        ("yyyy-MM-dd[ HH:mm[:ss]]", "2024-05-01", MAY_1, "2024-05-01 00:00:00"),
        ("MMM d, yyyy h:mm a", "May 1, 2024 1:05 PM", MAY_1 + 47_100_000, "May 1, 2024 1:05 PM"),
        (
            "EEE, dd MMM yyyy HH:mm:ss Z",
            "Wed, 01 May 2024 00:00:00 +0000",
            MAY_1,
            "Wed, 01 May 2024 00:00:00 +0000",
        ),
        ("yyyyMMdd'T'HHmmss", "20240501T000001", MAY_1 + 1000, "20240501T000001"),
        ("yyyy-DDD", "2024-122", MAY_1, "2024-122"),
        ("basic_date_time", "20240501T000000.250Z", MAY_1 + 250, "20240501T000000.250Z"),
        ("strict_year_month", "2024-05", MAY_1, "2024-05"),
        ("strict_hour_minute_second", "01:00:00", 3_600_000, "01:00:00"),
        ("epoch_second", "1714521600.5", MAY_1 + 500, "1714521600.5"),
    ],
)
def test_java_patterns_and_named_formats(pattern: str, text: str, millis: int, printed: str) -> None:
    formatter = DateFormatter(pattern)
    assert formatter.parse(text) == millis
    assert formatter.format(millis) == printed


def test_fraction_patterns_keep_their_width() -> None:
    formatter = DateFormatter("yyyy-MM-dd'T'HH:mm:ss.SSSSSSSSS")
    assert formatter.parse("2024-05-01T00:00:00.000000001", nanos=True) == MAY_1 * 10**6 + 1
    assert formatter.format(MAY_1 * 10**6 + 1, nanos=True) == "2024-05-01T00:00:00.000000001"
    with pytest.raises(ValueError):
        DateFormatter("yyyy-MM-dd HH:mm:ss.SSS").parse("2024-05-01 00:00:00.5")


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("foo", "Invalid format: [foo]: Unknown pattern letter: f"),
        ("yyyy-MM-dd'T", "Invalid format: [yyyy-MM-dd'T]: Pattern ends with an incomplete string literal"),
        ("yyyy]", "Invalid format: [yyyy]]: Pattern invalid as it contains ] without previous ["),
    ],
)
def test_invalid_patterns_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        DateFormatter(pattern)


@given(st.integers(min_value=-62_135_596_800_000, max_value=253_402_300_799_999))
def test_millis_survive_a_print_and_parse(millis: int) -> None:
    assert DEFAULT.parse(DEFAULT.format(millis)) == millis


@given(st.integers(min_value=0, max_value=MAX_NANOS))
def test_nanos_survive_a_print_and_parse(nanos: int) -> None:
    assert NANOS.parse(NANOS.format(nanos, nanos=True), nanos=True) == nanos


NOW = DEFAULT.parse("2024-05-15T10:20:30.456Z")


def _math(expr: str, round_up: bool = False, **kw) -> str:
    nanos = kw.get("nanos", False)
    value = parse_date_math(expr, NOW, DEFAULT, round_up, **kw)
    return DEFAULT.format(value // 10**6 if nanos else value)


@pytest.mark.parametrize(
    ("expr", "down", "up"),
    [
        ("now", "2024-05-15T10:20:30.456Z", "2024-05-15T10:20:30.456Z"),
        ("now-1d/d", "2024-05-14T00:00:00.000Z", "2024-05-14T23:59:59.999Z"),
        ("now/M", "2024-05-01T00:00:00.000Z", "2024-05-31T23:59:59.999Z"),
        ("now/y", "2024-01-01T00:00:00.000Z", "2024-12-31T23:59:59.999Z"),
        ("now/w", "2024-05-13T00:00:00.000Z", "2024-05-19T23:59:59.999Z"),
        ("now+1h/h", "2024-05-15T11:00:00.000Z", "2024-05-15T11:59:59.999Z"),
        ("now-30m/m", "2024-05-15T09:50:00.000Z", "2024-05-15T09:50:59.999Z"),
        ("now-d", "2024-05-14T10:20:30.456Z", "2024-05-14T10:20:30.456Z"),
        ("2024-01-31||+1M", "2024-02-29T00:00:00.000Z", "2024-02-29T00:00:00.000Z"),
        ("2024-01-01||+1M/d", "2024-02-01T00:00:00.000Z", "2024-02-01T23:59:59.999Z"),
        ("2024-05-01T10:00:00Z||-1s", "2024-05-01T09:59:59.000Z", "2024-05-01T09:59:59.000Z"),
    ],
)
def test_date_math_and_rounding(expr: str, down: str, up: str) -> None:
    """Round-up (lte/gt bounds) goes to the last millisecond of the unit."""
    assert _math(expr) == down
    assert _math(expr, round_up=True) == up


def test_round_up_fills_missing_time_fields_but_not_month_and_day() -> None:
    assert _math("2024-05", round_up=True) == "2024-05-01T23:59:59.999Z"
    assert _math("2024-05-01T10:00", round_up=True) == "2024-05-01T10:00:59.999Z"
    assert _math("2024-05-01T10:00:00Z", round_up=True) == "2024-05-01T10:00:00.999Z"
    assert _math("2024-05-01T10:00:00.000Z", round_up=True) == "2024-05-01T10:00:00.000Z"


def test_round_up_steps_back_one_millisecond_even_for_nanos() -> None:
    value = parse_date_math("2024-05-01T10:00:00.123456789Z||/s", NOW, NANOS, True, nanos=True)
    assert value == (MAY_1 + 36_000_999) * 10**6


def test_time_zone_applies_to_rounding_and_to_dates_without_offset() -> None:
    assert _math("now/d", time_zone="+01:00") == "2024-05-14T23:00:00.000Z"
    assert _math("now/d", True, time_zone="Europe/Paris") == "2024-05-15T21:59:59.999Z"
    assert _math("2024-05-01", time_zone="-05:00") == "2024-05-01T05:00:00.000Z"
    assert _math("2024-05-01T00:00:00Z", time_zone="-05:00") == "2024-05-01T00:00:00.000Z"


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("now*1d", "operator not supported for date math [*1d]"),
        ("now-1", "truncated date math [-1]"),
        ("now/2d", "rounding `/` can only be used on single unit types [/2d]"),
        ("now+1x", "unit [x] not supported for date math [+1x]"),
        (
            "abc||+1d",
            f"failed to parse date field [abc] with format [{DEFAULT_DATE_FORMAT}]: "
            f"[failed to parse date field [abc] with format [{DEFAULT_DATE_FORMAT}]]",
        ),
    ],
)
def test_date_math_errors(expr: str, message: str) -> None:
    with pytest.raises(ValueError) as e:
        parse_date_math(expr, NOW, DEFAULT, False)
    assert str(e.value) == message


def test_unknown_time_zone() -> None:
    with pytest.raises(ValueError, match="Unknown time-zone ID: Mars/Base"):
        parse_date_math("now", NOW, DEFAULT, False, time_zone="Mars/Base")


@pytest.mark.parametrize(
    "pattern", [DEFAULT_DATE_FORMAT, DEFAULT_DATE_NANOS_FORMAT, "yyyy/MM/dd HH:mm||MMM d, yy"]
)
def test_a_formatter_crosses_processes_as_its_pattern(pattern: str) -> None:
    """A date field's type travels in every shard message sorted by a date (a shard actor, a
    search worker): it pickles with plain `pickle`, small, and parses and prints as the original."""
    import pickle

    from leafsearch.index.mapping import FieldType

    field = FieldType("at", "at", "date", {"format": pattern}, {})
    encoded = pickle.dumps(field)
    assert len(encoded) < 1500
    copy = pickle.loads(encoded)
    assert copy.formatter.pattern == pattern
    for value in (MAY_1, MAY_1 + 45_296_789, 0):
        printed = field.formatter.format(value)
        assert copy.formatter.format(value) == printed
        assert copy.formatter.parse(printed) == field.formatter.parse(printed)
