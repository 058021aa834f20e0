"""``--format json`` and ``jsonl``: a DataFrame's rows as JSON, numbers as CSV writes them, and every type a query of
``kernelscope sql`` can give (LIST, STRUCT, MAP, BLOB, INTERVAL) as JSON too, and in CSV and tables."""

from __future__ import annotations

import math
from decimal import Decimal

import orjson
import pandas as pd

_OPTIONS = orjson.OPT_NON_STR_KEYS  # a MAP's keys may be numbers: written as JSON keys must be, as text


def json_text(frame: pd.DataFrame, *, lines: bool = False) -> str:
    """One JSON array of records, or (``lines``) one record per line."""
    rows = json_rows(frame)
    if lines:
        return "".join(orjson.dumps(row, default=_json_default, option=_OPTIONS).decode() + "\n" for row in rows)
    return orjson.dumps(rows, default=_json_default, option=_OPTIONS).decode() + "\n"


def nested_as_text(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each LIST, STRUCT, MAP and BLOB value as CSV and tables show it: its JSON (a BLOB, DuckDB's
    text of it), where pandas would write NumPy's repr (``[array([1], dtype=int32) array([2, 3], dtype=int32)]``)."""
    nested = (dict, list, bytes, bytearray, memoryview)
    columns = [
        name
        for name in frame.columns
        if frame[name].dtype == object and any(isinstance(v, nested) or getattr(v, "ndim", 0) for v in frame[name])
    ]
    if not columns:
        return frame
    frame = frame.copy()
    for name in columns:
        frame[name] = frame[name].map(_cell_text)
    return frame


def _cell_text(value):
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _json_default(value)
    if isinstance(value, (dict, list)) or getattr(value, "ndim", 0):
        return orjson.dumps(value, default=_json_default, option=_OPTIONS).decode()
    return value


def json_rows(frame: pd.DataFrame) -> list[dict]:
    """``frame``'s rows for JSON: numbers as CSV writes them, to 15 significant digits (2130.666, where pandas'
    writer gives 2130.666000000001986, and 1693.11 as 1693.1099999999999), a whole count as an integer, times as
    ISO 8601 text (as CSV and tables show them), and null for a missing or infinite value."""
    columns = []
    for name in frame.columns:
        values = frame[name]
        if pd.api.types.is_float_dtype(values.dtype):
            columns.append([_json_number(v) for v in values.tolist()])
        elif pd.api.types.is_datetime64_any_dtype(values.dtype):
            columns.append([None if pd.isna(v) else v.isoformat() for v in values])
        else:
            columns.append([None if _missing(v) else _json_number(v) for v in values.astype(object).tolist()])
    names = [str(name) for name in frame.columns]
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)] if columns else []


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _json_number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value.item() if getattr(value, "ndim", None) == 0 else value  # a NumPy scalar; an array stays one
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return None
    rounded = float(f"{value:.15g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


def _json_default(value):
    """What orjson writes no JSON for, from a query's columns: a LIST's array as a list, a BLOB as DuckDB's text of
    it (``\\x00`` for a byte that is not printable ASCII), a DECIMAL inside a LIST or STRUCT as the number it is,
    any other value (an INTERVAL) as its text."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Decimal):
        return _json_number(float(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in bytes(value))
    return str(value)
