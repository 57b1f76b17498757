"""DuckLake type strings, their Arrow equivalents, and DuckDB's text form of values (stats, defaults)."""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import struct
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import pyarrow as pa

from .errors import InvalidValueError, UnsupportedTypeError
from .records import Column

NESTED_TYPES = frozenset({"list", "struct", "map"})
BASE_TYPES = frozenset({
    "boolean", "int8", "int16", "int32", "int64", "int128", "uint8", "uint16", "uint32", "uint64", "uint128",
    "float32", "float64", "time", "time_ns", "timetz", "date", "timestamp", "timestamptz", "timestamp_s",
    "timestamp_ms", "timestamp_ns", "interval", "varchar", "blob", "uuid", "json", "variant", "geometry",
}) | NESTED_TYPES
_ALIASES = {"timestamp_us": "timestamp"}  # the reference reads both and writes 'timestamp'
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_FIELD_ID = b"PARQUET:field_id"

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1), "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1), "int128": (-(2**127), 2**127 - 1), "uint8": (0, 2**8 - 1),
    "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1), "uint128": (0, 2**128 - 1),
}
FLOAT_TYPES = frozenset({"float32", "float64"})
# timestamp-like types -> units per second of their integer representation
TIMESTAMP_UNITS = {"timestamp_s": 1, "timestamp_ms": 10**3, "timestamp": 10**6, "timestamptz": 10**6,
                   "timestamp_ns": 10**9}
INT64_MAX = 2**63 - 1  # timestamp +infinity; -INT64_MAX is -infinity (DuckDB's sentinels)
INT32_MAX = 2**31 - 1  # date +infinity; -INT32_MAX is -infinity
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()
_US_PER_DAY = 86_400 * 10**6
_WIDE = Context(prec=100)  # room for any decimal(38,s) without rounding


def parse_type(s: str) -> str:
    """Normalise a DuckLake type string ('INT64' -> 'int64', 'DECIMAL(10, 2)' -> 'decimal(10,2)')."""
    t = s.strip().lower()
    m = _DECIMAL_RE.match(t)
    if m:
        p, sc = int(m.group(1)), int(m.group(2))
        if not (1 <= p <= 38 and sc <= p):
            raise UnsupportedTypeError(f"unsupported DuckLake type {s!r}: decimal width must be 1-38 and scale <= width")
        return f"decimal({p},{sc})"
    t = _ALIASES.get(t, t)
    if t not in BASE_TYPES:
        raise UnsupportedTypeError(f"unsupported DuckLake type {s!r}")
    return t


def decimal_params(t: str) -> tuple[int, int]:
    """(precision, scale) of a decimal type string."""
    m = _DECIMAL_RE.match(parse_type(t))
    if not m:
        raise ValueError(f"{t!r} is not a decimal type")
    return int(m.group(1)), int(m.group(2))


def _is_decimal(t: str) -> bool:
    return t.startswith("decimal(")


# ---------------------------------------------------------------------------------------------- Arrow types

def _scalar_arrow(t: str) -> pa.DataType:
    if t in INT_RANGES and not t.endswith("128"):
        return getattr(pa, t)()
    if _is_decimal(t):
        return pa.decimal128(*decimal_params(t))
    simple: dict[str, Callable[[], pa.DataType]] = {
        "boolean": pa.bool_, "float32": pa.float32, "float64": pa.float64, "varchar": pa.string,
        "blob": pa.binary, "date": pa.date32, "time": lambda: pa.time64("us"), "time_ns": lambda: pa.time64("ns"),
        # DuckDB's own Arrow export: TIMETZ as UTC-normalised time64[us] (the offset is lost), HUGEINT as decimal
        "timetz": lambda: pa.time64("us"), "int128": lambda: pa.decimal128(38, 0),
        "uint128": lambda: pa.decimal128(38, 0), "timestamp": lambda: pa.timestamp("us"),
        "timestamptz": lambda: pa.timestamp("us", tz="UTC"), "timestamp_s": lambda: pa.timestamp("s"),
        "timestamp_ms": lambda: pa.timestamp("ms"), "timestamp_ns": lambda: pa.timestamp("ns"),
        "interval": pa.month_day_nano_interval,
        "uuid": getattr(pa, "uuid", lambda: pa.binary(16)), "json": getattr(pa, "json_", pa.string),
    }
    if t in simple:
        return simple[t]()
    raise UnsupportedTypeError(f"DuckLake type {t!r} has no Arrow equivalent")


def to_arrow(column: Column) -> pa.DataType:
    """The Arrow type of a column tree (children carry PARQUET:field_id metadata)."""
    t = parse_type(column.type)
    if t == "list":
        if len(column.children) != 1:
            raise ValueError(f"list column {column.name!r} must have exactly one child")
        return pa.list_(arrow_field(column.children[0]))
    if t == "map":
        if len(column.children) != 2:
            raise ValueError(f"map column {column.name!r} must have children key and value")
        names = {c.name: c for c in column.children}
        key, value = (names["key"], names["value"]) if {"key", "value"} <= names.keys() else column.children
        return pa.map_(arrow_field(key).with_nullable(False), arrow_field(value))
    if t == "struct":
        return pa.struct([arrow_field(c) for c in column.children])
    return _scalar_arrow(t)


def arrow_field(column: Column) -> pa.Field:
    """An Arrow field for the column with PARQUET:field_id = column_id on it and every descendant."""
    return pa.field(column.name, to_arrow(column), nullable=column.nullable,
                    metadata={_FIELD_ID: str(column.column_id).encode()})


def arrow_schema(columns: Sequence[Column]) -> pa.Schema:
    """An Arrow schema for top-level columns, in the given order, with field ids on every node."""
    return pa.schema([arrow_field(c) for c in columns])


def _arrow_scalar_type(t: pa.DataType, path: str) -> str:
    types = pa.types
    if isinstance(t, pa.BaseExtensionType):
        name = t.extension_name
        if name == "arrow.uuid":
            return "uuid"
        if name == "arrow.json":
            return "json"
        return _arrow_scalar_type(t.storage_type, path)
    if types.is_boolean(t):
        return "boolean"
    if types.is_integer(t):
        return ("int" if types.is_signed_integer(t) else "uint") + str(t.bit_width)
    if types.is_float32(t) or types.is_float64(t):
        return "float32" if types.is_float32(t) else "float64"
    if types.is_decimal(t) and 1 <= t.precision <= 38 and 0 <= t.scale <= t.precision:
        return f"decimal({t.precision},{t.scale})"
    if types.is_string(t) or types.is_large_string(t) or types.is_string_view(t):
        return "varchar"
    if types.is_binary(t) or types.is_large_binary(t) or types.is_binary_view(t) or types.is_fixed_size_binary(t):
        return "blob"
    if types.is_date(t):
        return "date"
    if types.is_time(t):
        return "time"
    if types.is_timestamp(t):
        if t.tz is not None:
            return "timestamptz"
        return {"s": "timestamp_s", "ms": "timestamp_ms", "us": "timestamp", "ns": "timestamp_ns"}[t.unit]
    if t == pa.month_day_nano_interval():
        return "interval"
    raise UnsupportedTypeError(f"column {path!r} has Arrow type {t}, which has no DuckLake equivalent")


def from_arrow(field: pa.Field, next_id: Callable[[], int] | Iterator[int], _path: str = "") -> Column:
    """A Column tree for an Arrow field; column ids come from next_id depth first, parent before children."""
    take: Callable[[], int] = next_id if callable(next_id) else lambda: next(next_id)  # type: ignore[arg-type]
    path = f"{_path}.{field.name}" if _path else field.name
    t = field.type
    while pa.types.is_dictionary(t):
        t = t.value_type
    column_id = take()  # parent before children
    children: tuple[Column, ...] = ()
    if pa.types.is_map(t):
        # Arrow map keys are never nullable; DuckDB records the key column as nullable all the same
        children = (from_arrow(t.key_field.with_name("key").with_nullable(True), take, path),
                    from_arrow(t.item_field.with_name("value"), take, path))
        type_name = "map"
    elif (pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t)
          or pa.types.is_list_view(t) or pa.types.is_large_list_view(t)):
        children = (from_arrow(t.value_field.with_name("element"), take, path),)
        type_name = "list"
    elif pa.types.is_struct(t):
        if t.num_fields == 0:
            raise UnsupportedTypeError(f"column {path!r} is a struct without fields, which DuckLake cannot store")
        children = tuple(from_arrow(t.field(i), take, path) for i in range(t.num_fields))
        type_name = "struct"
    else:
        type_name = _arrow_scalar_type(t, path)
    return Column(column_id, field.name, type_name, field.nullable, children=children)


# ------------------------------------------------------------------------------------ calendar arithmetic

def _civil(days: int) -> tuple[int, int, int]:
    """(year, month, day) of a day number since 1970-01-01, proleptic Gregorian, year 0 = 1 BC."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (m <= 2), m, d


def _days(y: int, m: int, d: int) -> int:
    """Inverse of _civil."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _date_text(days: int) -> str:
    if days >= INT32_MAX or days <= -INT32_MAX:
        return "infinity" if days > 0 else "-infinity"
    y, m, d = _civil(days)
    return f"{y:04d}-{m:02d}-{d:02d}" if y > 0 else f"{1 - y:04d}-{m:02d}-{d:02d} (BC)"


def _clock_text(ticks: int, per_second: int) -> str:
    """HH:MM:SS[.fraction without trailing zeros] (hours may exceed 23)."""
    secs, frac = divmod(ticks, per_second)
    h, rest = divmod(secs, 3600)
    text = f"{h:02d}:{rest // 60:02d}:{rest % 60:02d}"
    if frac:
        width = len(str(per_second)) - 1
        text += "." + f"{frac:0{width}d}".rstrip("0")
    return text


def _timestamp_text(n: int, per_second: int, tz: bool) -> str:
    if n >= INT64_MAX or n <= -INT64_MAX:
        return "infinity" if n > 0 else "-infinity"
    days, ticks = divmod(n, 86_400 * per_second)
    return f"{_date_text(days)} {_clock_text(ticks, per_second)}" + ("+00" if tz else "")


def _offset_text(seconds: int) -> str:
    sign = "+" if seconds >= 0 else "-"
    h, rest = divmod(abs(seconds), 3600)
    m, s = divmod(rest, 60)
    return f"{sign}{h:02d}" + (f":{m:02d}" if m or s else "") + (f":{s:02d}" if s else "")


def _interval_text(months: int, days: int, micros: int) -> str:
    parts = []
    years, months = int(months / 12), months - 12 * int(months / 12)  # C++ truncating division
    for n, unit in ((years, "year"), (months, "month"), (days, "day")):
        if n:
            parts.append(f"{n} {unit}" + ("" if abs(n) == 1 else "s"))
    if micros:
        parts.append(("-" if micros < 0 else "") + _clock_text(abs(micros), 10**6))
    return " ".join(parts) or "00:00:00"


# ------------------------------------------------------------------------------------------- DuckDB SQL

_SCALAR_SQL = {
    "int8": "TINYINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "int128": "HUGEINT",
    "uint8": "UTINYINT", "uint16": "USMALLINT", "uint32": "UINTEGER", "uint64": "UBIGINT", "uint128": "UHUGEINT",
    "float32": "FLOAT", "float64": "DOUBLE", "varchar": "VARCHAR", "boolean": "BOOLEAN", "date": "DATE",
    "time": "TIME", "timetz": "TIMETZ", "timestamp": "TIMESTAMP", "timestamptz": "TIMESTAMPTZ",
    "timestamp_s": "TIMESTAMP_S", "timestamp_ms": "TIMESTAMP_MS", "timestamp_ns": "TIMESTAMP_NS",
    "interval": "INTERVAL", "blob": "BLOB", "uuid": "UUID", "json": "VARCHAR",
}


def duckdb_sql_type(col: Column) -> str:
    """The DuckDB SQL type of a DuckLake column tree."""
    if col.type == "list":
        return duckdb_sql_type(col.children[0]) + "[]"
    if col.type == "struct":
        inner = ", ".join('"' + c.name.replace('"', '""') + '" ' + duckdb_sql_type(c) for c in col.children)
        return f"STRUCT({inner})"
    if col.type == "map":
        return f"MAP({duckdb_sql_type(col.children[0])}, {duckdb_sql_type(col.children[1])})"
    if col.type.startswith("decimal"):
        p, s = decimal_params(col.type)
        return f"DECIMAL({p},{s})"
    return _SCALAR_SQL[col.type]


# ----------------------------------------------------------------------------------------- float text

def float32(x: float) -> float:
    """x rounded to the nearest float32 (as a Python float)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _float32_text(x: float) -> str:
    """Shortest decimal that reads back as this float32, printed like DuckDB (fmt "{}"; Python repr layout).

    Where the shortest candidate is not unique or sits on a rounding boundary DuckDB's Grisu gives up and
    prints the value as a double; so do we. Grisu also gives up on a few other values (seen: ~5% of integers
    with 9-12 digits), where our shorter text still denotes the same float32.
    """
    if math.isnan(x) or math.isinf(x) or x == 0:
        return repr(x)
    sign, ax = ("-" if x < 0 else ""), abs(x)
    bits = struct.unpack("<I", struct.pack("<f", ax))[0]
    frac_bits, exp_bits = bits & 0x7FFFFF, bits >> 23
    mant, exp2 = (frac_bits, -149) if exp_bits == 0 else (frac_bits | 0x800000, exp_bits - 150)
    v = Fraction(mant) * Fraction(2) ** exp2
    ulp = Fraction(2) ** exp2
    lo = v - (ulp / 4 if frac_bits == 0 and exp_bits > 1 else ulp / 2)
    hi = v + ulp / 2
    e = math.floor(math.log10(ax))
    e += (Fraction(10) ** (e + 1) <= v) - (Fraction(10) ** e > v)
    for p in range(1, 10):
        scale = Fraction(10) ** (e - p + 1)
        base = math.floor(v / scale)
        inside = [c for c in (base, base + 1) if lo < c * scale < hi]
        if not inside:
            continue
        if len(inside) == 2 and abs(inside[0] * scale - v) == abs(inside[1] * scale - v):
            break
        best = min(inside, key=lambda c: abs(c * scale - v))
        return sign + repr(float(f"{best}e{e - p + 1}"))
    return sign + repr(ax)


# ------------------------------------------------------------------------------------- format / parse

def _epoch(t: str, value: Any) -> int:
    """Integer representation of a temporal value in the type's own unit (days, micros, ...)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if t == "date":
        if isinstance(value, dt.datetime):
            value = value.date()
        return value.toordinal() - _EPOCH_ORDINAL
    if t in TIMESTAMP_UNITS:
        if isinstance(value, dt.date) and not isinstance(value, dt.datetime):
            value = dt.datetime(value.year, value.month, value.day)
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        micros = (value.toordinal() - _EPOCH_ORDINAL) * _US_PER_DAY + _time_micros(value.time())
        per = TIMESTAMP_UNITS[t]
        return micros * per // 10**6 if per >= 10**6 else micros // (10**6 // per)
    if t in ("time", "time_ns", "timetz"):
        micros = _time_micros(value)
        return micros * 1000 if t == "time_ns" else micros
    raise TypeError(f"cannot convert {value!r} to {t}")


def _time_micros(v: dt.time) -> int:
    return ((v.hour * 60 + v.minute) * 60 + v.second) * 10**6 + v.microsecond


def format_value(type: str, value: Any, *, form: str = "stats") -> str | None:
    """DuckDB's text of a Python value of a DuckLake type (None for None), as file stats hold it.

    Temporal types also take ints in the type's own unit (days; seconds/ms/us/ns since the epoch; micros or
    nanos since midnight). Two types differ by form: in "stats" (ducklake_file_column_stats) booleans are
    '0'/'1' and blobs uppercase hex; in "value" (Value::ToString, e.g. initial_default) they are 'true'/'false'
    and DuckDB's escaped blob text ('\\xAA\\x00z').
    """
    if form not in ("stats", "value"):
        raise ValueError(f"form must be 'stats' or 'value', not {form!r}")
    if value is None:
        return None
    t = parse_type(type)
    if t in INT_RANGES:
        n = int(value)
        lo, hi = INT_RANGES[t]
        if not lo <= n <= hi:
            raise InvalidValueError(f"{value!r} is out of range for {t}")
        return str(n)
    if t == "boolean":
        return ("1" if value else "0") if form == "stats" else ("true" if value else "false")
    if t == "float64":
        return repr(float(value))
    if t == "float32":
        return _float32_text(float32(float(value)))
    if _is_decimal(t):
        p, s = decimal_params(t)
        d = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        q = d.quantize(Decimal(1).scaleb(-s), rounding=ROUND_HALF_UP, context=_WIDE)
        if len(q.as_tuple().digits) > p and q != 0:
            raise InvalidValueError(f"{value!r} does not fit {t}")
        return f"{q.copy_abs() if q == 0 else q:f}"
    if t in ("varchar", "json"):
        return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
    if t == "blob":
        if form == "stats":
            return bytes(value).hex().upper()
        return "".join(chr(c) if 32 <= c <= 126 and chr(c) not in "\\'\"" else f"\\x{c:02X}" for c in bytes(value))
    if t == "uuid":
        if isinstance(value, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(value)))
        return str(value if isinstance(value, uuid.UUID) else uuid.UUID(int=value) if isinstance(value, int)
                   else uuid.UUID(value))
    if t == "date":
        return _date_text(_epoch(t, value))
    if t in TIMESTAMP_UNITS:
        return _timestamp_text(_epoch(t, value), TIMESTAMP_UNITS[t], t == "timestamptz")
    if t in ("time", "time_ns"):
        return _clock_text(_epoch(t, value), 10**9 if t == "time_ns" else 10**6)
    if t == "timetz":
        offset = value.utcoffset()
        return _clock_text(_time_micros(value), 10**6) + _offset_text(int(offset.total_seconds()) if offset else 0)
    if t == "interval":
        if isinstance(value, dt.timedelta):
            return _interval_text(0, value.days, value.seconds * 10**6 + value.microseconds)
        months, days, nanos = (value.months, value.days, value.nanoseconds) if hasattr(value, "months") else value
        return _interval_text(months, days, nanos // 1000)
    raise UnsupportedTypeError(f"values of type {t} have no text form here")


_DATE_RE = r"(\d+)-(\d{1,2})-(\d{1,2})(\s*\(BC\))?"
_CLOCK_RE = r"(\d+):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
_OFFSET_RE = r"(Z|[+-]\d{2}(?::?\d{2}(?::?\d{2})?)?)?"
_TS_RE = re.compile(rf"^{_DATE_RE}(?:[ T]{_CLOCK_RE})?\s*{_OFFSET_RE}\s*(\(BC\))?$")
_TIME_RE = re.compile(rf"^{_CLOCK_RE}\s*{_OFFSET_RE}$")


def _frac(text: str | None, digits: int) -> int:
    return int((text or "").ljust(digits, "0")[:digits] or 0)


def _offset_seconds(text: str | None) -> int:
    if not text or text == "Z":
        return 0
    digits = text[1:].replace(":", "")
    secs = int(digits[:2]) * 3600 + int(digits[2:4] or 0) * 60 + int(digits[4:6] or 0)
    return -secs if text[0] == "-" else secs


def _parse_date_days(s: str) -> int | float:
    s = s.strip()
    if s.lower() in ("infinity", "-infinity"):
        return -math.inf if s.startswith("-") else math.inf
    m = re.match(rf"^{_DATE_RE}$", s)
    if not m:
        raise InvalidValueError(f"not a date: {s!r}")
    y = int(m.group(1))
    return _days(1 - y if m.group(4) else y, int(m.group(2)), int(m.group(3)))


def _parse_timestamp_ns(s: str, tz: bool) -> int | float:
    """Nanoseconds since the epoch (UTC for timestamptz); +-inf for DuckDB's infinities."""
    s = s.strip()
    if s.lower() in ("infinity", "-infinity"):
        return -math.inf if s.startswith("-") else math.inf
    m = _TS_RE.match(s)
    if not m:
        raise InvalidValueError(f"not a timestamp: {s!r}")
    y = int(m.group(1))
    days = _days(1 - y if (m.group(4) or m.group(10)) else y, int(m.group(2)), int(m.group(3)))
    clock = (int(m.group(5) or 0) * 3600 + int(m.group(6) or 0) * 60 + int(m.group(7) or 0)) * 10**9
    offset = _offset_seconds(m.group(9)) if tz else 0
    return days * 86_400 * 10**9 + clock + _frac(m.group(8), 9) - offset * 10**9


def _parse_clock(s: str) -> tuple[int, int]:
    """(nanoseconds since midnight, offset seconds) of a time or timetz text."""
    m = _TIME_RE.match(s.strip())
    if not m:
        raise InvalidValueError(f"not a time: {s!r}")
    ns = (int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))) * 10**9 + _frac(m.group(4), 9)
    return ns, _offset_seconds(m.group(5))


def _parse_interval(s: str) -> tuple[int, int, int]:
    """(months, days, micros) of DuckDB's interval text."""
    months = days = micros = 0
    for num, unit, clock in re.findall(r"(-?\d+)\s+(year|month|day)s?|(-?\d+:\d{2}:\d{2}(?:\.\d+)?)", s.strip()):
        if clock:
            sign = -1 if clock.startswith("-") else 1
            ns, _ = _parse_clock(clock.lstrip("-"))
            micros += sign * (ns // 1000)
        else:
            months += int(num) * 12 if unit == "year" else int(num) if unit == "month" else 0
            days += int(num) if unit == "day" else 0
    return months, days, micros


def parse_value(type: str, s: str | None, *, form: str = "value") -> Any:
    """The Python value of DuckDB's text for a DuckLake type (the inverse of format_value).

    form matters for blobs only: "value" (the default: Value::ToString, as in initial_default) reads DuckDB's
    escaped text, "stats" reads the hex of file stats; booleans read both '0'/'1' and 'true'/'false'.
    Raises ValueError for values Python's datetime types cannot hold (infinities, BC or year > 9999, 24:00:00,
    sub-microsecond fractions); compare_values handles those.
    """
    if form not in ("stats", "value"):
        raise ValueError(f"form must be 'stats' or 'value', not {form!r}")
    if s is None:
        return None
    t = parse_type(type)
    if t in INT_RANGES:
        return int(s)
    if t in FLOAT_TYPES:
        return float(s)
    if _is_decimal(t):
        return Decimal(s)
    if t == "boolean":
        truth = {"1": True, "true": True, "t": True, "0": False, "false": False, "f": False}.get(s.strip().lower())
        if truth is None:
            raise InvalidValueError(f"not a boolean: {s!r}")
        return truth
    if t in ("varchar", "json"):
        return s
    if t == "blob":
        if form == "stats":
            return bytes.fromhex(s)
        parts = re.split(r"\\x([0-9a-fA-F]{2})", s)  # text, hex, text, hex, ..., text
        return b"".join(bytes.fromhex(p) if i % 2 else p.encode("ascii") for i, p in enumerate(parts))
    if t == "uuid":
        return uuid.UUID(s)
    if t == "interval":
        months, days, micros = _parse_interval(s)
        return pa.MonthDayNano([months, days, micros * 1000])
    try:
        if t == "date":
            return dt.date.fromordinal(int(_parse_date_days(s)) + _EPOCH_ORDINAL)
        if t in TIMESTAMP_UNITS:
            ns = _parse_timestamp_ns(s, t == "timestamptz")
            micros, rest = divmod(int(ns), 1000)
            if rest:
                raise ValueError("sub-microsecond precision")
            value = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=micros)
            return value.replace(tzinfo=dt.timezone.utc) if t == "timestamptz" else value
        if t in ("time", "time_ns", "timetz"):
            ns, offset = _parse_clock(s)
            micros, rest = divmod(ns, 1000)
            if rest or micros >= _US_PER_DAY:
                raise ValueError("sub-microsecond precision or 24:00:00")
            clock = (dt.datetime.min + dt.timedelta(microseconds=micros)).time()
            return clock.replace(tzinfo=dt.timezone(dt.timedelta(seconds=offset))) if t == "timetz" else clock
    except (OverflowError, ValueError) as e:
        raise InvalidValueError(f"{s!r} cannot be held by a Python {t} value: {e}") from e
    raise UnsupportedTypeError(f"values of type {t} have no text form here")


def sort_key(type: str, s: str) -> Any:
    """A key that orders DuckDB's texts of one type as DuckDB orders the values."""
    t = parse_type(type)
    if t in INT_RANGES:
        return int(s)
    if t in FLOAT_TYPES:
        x = float(s)
        return (1, 0.0) if math.isnan(x) else (0, x)  # NaN sorts above +inf in DuckDB
    if _is_decimal(t):
        try:
            return Decimal(s)
        except InvalidOperation as e:
            raise InvalidValueError(f"not a decimal: {s!r}") from e
    if t == "boolean":
        return parse_value(t, s)
    if t == "date":
        return _parse_date_days(s)
    if t in TIMESTAMP_UNITS:
        return _parse_timestamp_ns(s, t == "timestamptz")
    if t in ("time", "time_ns"):
        return _parse_clock(s)[0]
    if t == "timetz":
        ns, offset = _parse_clock(s)
        return (ns - offset * 10**9, -offset)
    if t == "interval":
        months, days, micros = _parse_interval(s)
        return (months * 30 + days) * _US_PER_DAY + micros
    if t == "uuid":
        return uuid.UUID(s).int
    if t == "blob":
        return bytes.fromhex(s)
    if t in ("varchar", "json"):
        return s.encode("utf-8", "surrogatepass")  # DuckDB compares strings bytewise
    raise UnsupportedTypeError(f"values of type {t} cannot be compared")


def compare_values(type: str, a: str, b: str) -> int:
    """-1, 0 or 1 as DuckDB orders two stat texts of the type (numeric, temporal or bytewise)."""
    ka, kb = sort_key(type, a), sort_key(type, b)
    return (ka > kb) - (ka < kb)
