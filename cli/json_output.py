"""``--format json`` and ``jsonl``: a DataFrame's rows as JSON, numbers as CSV writes them, and every type a query of
``kernelscope sql`` can give (LIST, STRUCT, MAP, BLOB, INTERVAL) as JSON too."""

from __future__ import annotations

import math
from decimal import Decimal

import orjson
import pandas as pd


def json_text(frame: pd.DataFrame, *, lines: bool = False) -> str:
    """One JSON array of records, or (``lines``) one record per line."""
    rows = json_rows(frame)
    if lines:
        return "".join(orjson.dumps(row, default=_json_default).decode() + "\n" for row in rows)
    return orjson.dumps(rows, default=_json_default).decode() + "\n"


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
