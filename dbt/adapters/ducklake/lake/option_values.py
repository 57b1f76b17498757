"""Option values as DuckDB's set_option takes them: byte sizes ('512MB') and intervals ('2 days')."""

from __future__ import annotations

import calendar
import datetime as dt
import re

from .errors import InvalidOptionError

_SIZE_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "kib": 1024, "mib": 1024**2,
               "gib": 1024**3, "tib": 1024**4}
_UNITS = {"microsecond": 1e-6, "millisecond": 1e-3, "second": 1, "minute": 60, "hour": 3600, "day": 86400,
          "week": 7 * 86400}
_UNIT_ALIASES = {"us": "microsecond", "ms": "millisecond", "s": "second", "sec": "second", "m": "minute",
                 "min": "minute", "h": "hour", "hr": "hour", "d": "day", "w": "week", "mon": "month", "y": "year",
                 "yr": "year"}
_INTERVAL_PART = re.compile(
    r"\s*(?:(?P<clock>\d+:\d{1,2}:\d{1,2}(?:\.\d+)?)|(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>"
    r"microsecond|millisecond|second|minute|hour|day|week|month|year|sec|min|mon|hr|yr|us|ms|[smhdwy])s?\b)")


def parse_size(value: str | int) -> int:
    """A byte size: an integer or '<n>[B|KB|MB|GB|TB|KiB|MiB|GiB|TiB]'. Raises ValueError."""
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", str(value).lower())
    if not m or m.group(2) not in _SIZE_UNITS:
        raise InvalidOptionError(f"cannot parse a file size from {value!r}: expected e.g. 536870912 or '512MB'")
    return int(m.group(1)) * _SIZE_UNITS[m.group(2)]


def parse_threshold(value: float | str | None, what: str = "delete_threshold") -> float | None:
    """A fraction of a file's rows as a float in [0, 1] (None stays None), e.g. rewrite_delete_threshold.

    Raises:
        ValueError: not a number, or outside 0..1.
    """
    if value is None:
        return None
    try:
        got = float(value)
    except (TypeError, ValueError) as e:
        raise InvalidOptionError(f"{what} must be a number between 0 and 1, got {value!r}") from e
    if not 0 <= got <= 1:  # also refuses NaN
        raise InvalidOptionError(f"{what} must be between 0 and 1, got {value!r}")
    return got


def parse_interval(text: str) -> tuple[int, dt.timedelta]:
    """(months, rest) of an interval as DuckDB's option values take it: '2 days', '1 week 2 days', '1 month',
    '36 hours', '00:00:01', '1 day 12:00:00'.

    Raises:
        ValueError: the text is not a sequence of '<number> <unit>' parts (unit microsecond..year) or 'HH:MM:SS'.
    """
    months, rest, parts = 0, dt.timedelta(), 0
    pos, low = 0, text.lower()
    for m in _INTERVAL_PART.finditer(low):
        if low[pos:m.start()].strip():
            break
        pos, parts = m.end(), parts + 1
        if m.group("clock"):
            h, mi, sec = m.group("clock").split(":")
            rest += dt.timedelta(hours=int(h), minutes=int(mi), seconds=float(sec))
            continue
        n, unit = float(m.group("n")), _UNIT_ALIASES.get(m.group("unit"), m.group("unit"))
        if unit in ("month", "year"):
            if n != int(n):
                raise InvalidOptionError(f"cannot parse interval {text!r}: months and years must be whole numbers")
            months += int(n) * (12 if unit == "year" else 1)
        else:
            rest += dt.timedelta(seconds=n * _UNITS[unit])
    if not parts or low[pos:].strip():
        raise InvalidOptionError(f"cannot parse interval {text!r}: expected e.g. '2 days', '1 week', '12 hours', '00:30:00'")
    return months, rest


def interval_before(now: dt.datetime, text: str) -> dt.datetime:
    """now minus the interval text, months by the calendar (day clamped to the month's end), as DuckDB does.

    Raises:
        ValueError: the text is not an interval (see parse_interval).
    """
    months, rest = parse_interval(text)
    if months:
        total = now.year * 12 + now.month - 1 - months
        year, month = divmod(total, 12)
        last = calendar.monthrange(year, month + 1)[1]
        now = now.replace(year=year, month=month + 1, day=min(now.day, last))
    return now - rest
