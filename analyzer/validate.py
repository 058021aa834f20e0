"""Checks of a trace's events before attribution: one clear sentence for the first event it cannot use.

Ingest (ingest.py) reads whatever DuckDB can cast into the ``events`` columns; a field it cannot read
becomes NULL. Without these checks such an event would silently lose its row (a kernel without ``dur``)
or its attribution (a kernel without ``correlation``). The rules are in validate.sql; docs/errors.md
lists every message.
"""

from __future__ import annotations

import os

import duckdb

from .errors import BadInputError
from .sql import execute, run_sql_file

# in turn, where device events lack correlations: the records that are no device work first
RELINKS = ("scope_metrics.sql", "linked_by_external_id.sql", "linked_by_flow.sql")
NOTHING_TO_ATTRIBUTE = "holds no device events (kernel, memcpy, memset) and no CPU operators"
NOT_TORCH = ", not a torch.profiler trace"
NAME_CHARS = 60
VALUE_CHARS = 40
# whether category {c} (as written: a 2021 name, a fork's) is one of the events whose times must fit 64-bit
# nanoseconds (ingest.sql): a device event, a launch of any device's runtime or driver, an operator or annotation
HELD_TO_RULES = (
    "({c} IN ('kernel', 'gpu_memcpy', 'gpu_memset', 'memcpy', 'memset', 'cpu_op', 'user_annotation', 'runtime',"
    " 'driver', 'Kernel', 'Memcpy', 'Memset', 'Runtime', 'Operator', 'mtia_ccp_events') OR suffix({c}, '_kernel')"
    " OR suffix({c}, '_memcpy') OR suffix({c}, '_memset') OR suffix({c}, '_runtime') OR suffix({c}, '_driver'))"
)
JSON_TYPES = {"VARCHAR": "string", "BOOLEAN": "boolean", "ARRAY": "array"} | dict.fromkeys(
    ("UBIGINT", "BIGINT", "DOUBLE"), "number"
)


def validate_events(
    con: duckdb.DuckDBPyConnection,
    path: str | os.PathLike,
    *,
    rows_checked: bool = False,
    repeats: bool | None = None,
) -> None:
    """Raise BadInputError naming ``path`` and the first unusable event of table ``events``.

    ``rows_checked``: the native reader found that no event breaks rules 1-7 (TraceHeader.all_rows_checked), so
    only the repeats (rules 8, 9) are looked for. ``repeats``: whether there are any, where the native reader read
    every part of the trace (TraceHeader.repeats: validate_repeats.sql's answer); None: validate_repeats.sql says.
    Where device events lack a correlation (rule 5), the XPU scope profiler's metrics records among them are filed
    as no device work (scope_metrics.sql); a trace none of whose device events and launches has one has them linked
    by their External ids instead (linked_by_external_id.sql), and one whose device events alone lack them has those
    linked through their ac2g flows (linked_by_flow.sql); then it is checked again."""
    if rows_checked and repeats is None:  # the query that names the first fault costs more to plan than this one
        repeats = run_sql_file(con, "validate_repeats.sql").fetchone()[0]  # costs to run on a small trace
    if rows_checked and not repeats:
        return
    con.execute(f"SET VARIABLE ks_rows_checked = {'true' if rows_checked else 'false'}")
    row = run_sql_file(con, "validate.sql").fetchone()
    if row is None:
        return
    rule, event_id, cat, name, problem, count = row
    if rule == 5 and any(run_sql_file(con, f).fetchone()[0] for f in RELINKS):
        return validate_events(con, path)
    what = event_label(cat, name)
    more = f", and {count - 1} other event{'s' if count > 2 else ''} the same way" if count > 1 else ""
    raise BadInputError(path, f"traceEvents[{event_id}]{f' ({what})' if what else ''} {problem}{more}")


def pair_spans(con: duckdb.DuckDBPyConnection, path: str | os.PathLike, *, rows_checked: bool = False) -> bool:
    """Make each "B" event of table ``events`` and its "E" one complete event (paired_spans.sql); whether the trace
    held any "B". A "B" that nothing ends is refused where the attribution would read it as a span: its end, and
    so what it holds, is not known. ``rows_checked``: the native reader found no "B" (a "B" breaks its check)."""
    if rows_checked or not run_sql_file(con, "begin_events.sql").fetchone()[0]:
        return False
    row = run_sql_file(con, "paired_spans.sql").fetchone()
    if row is not None:
        event_id, cat, name, count = row
        what = event_label(cat, name)
        more = f", and {count - 1} other event{'s' if count > 2 else ''} the same way" if count > 1 else ""
        problem = 'begins a span ("ph": "B") that no "E" event of its thread (pid, tid) ends'
        raise BadInputError(path, f"traceEvents[{event_id}]{f' ({what})' if what else ''} {problem}{more}")
    return True


def nothing_to_attribute(con: duckdb.DuckDBPyConnection) -> str:
    """The problem of a trace with nothing to attribute: NOTHING_TO_ATTRIBUTE, and what wrote it where its events
    show another profiler (foreign_trace.sql)."""
    tf_process, browser_category, converted_process, uncategorized, first_name = run_sql_file(
        con, "foreign_trace.sql"
    ).fetchone()
    if tf_process is not None:
        what = f"a TensorFlow or JAX profiler trace (process {_short(repr(tf_process), NAME_CHARS)})"
    elif browser_category is not None:
        what = f"a Chrome browser trace (category {_short(repr(browser_category), NAME_CHARS)})"
    elif converted_process is not None:
        process = _short(repr(converted_process), NAME_CHARS)
        what = f"an nvprof or Nsight Systems report in Chrome's format (category 'cuda', process {process})"
    elif uncategorized is not None:
        first = _short(repr(first_name), NAME_CHARS)
        return (
            f"{NOTHING_TO_ATTRIBUTE}: none of its {uncategorized} events has a category (cat), which every event of"
            f" torch.profiler has (the first: {first}){NOT_TORCH}"
        )
    else:
        return NOTHING_TO_ATTRIBUTE
    return f"{NOTHING_TO_ATTRIBUTE}: it is {what}{NOT_TORCH}"


def validate_escapes(con: duckdb.DuckDBPyConnection, path: str | os.PathLike) -> None:
    """Raise BadInputError naming ``path`` and the first scope whose name holds a ``%XX`` escape that does not read
    back as UTF-8, in a recording that escapes names (rundir.scope_text): the macros would fail on it later. The
    macros themselves are asked (ks_scope_module, ks_scope_call: scope_names.sql), so what is decoded is what they
    decode, the name after its prefix: a manifest's prefix that ends in half an escape (``ks.fn:%C3``) does not lend
    its byte to the name."""
    named = execute(
        con,
        """SELECT min(event_id), name FROM events
           WHERE (starts_with(name, getvariable('module_prefix')) OR starts_with(name, getvariable('function_prefix')))
             AND contains(name, '%') GROUP BY name ORDER BY 1""",
    ).fetchall()
    for event_id, name in named:  # a handful at most: only names with characters Kineto's export mangles have one
        try:
            execute(con, "SELECT ks_scope_module($1), ks_scope_call($1)", [name]).fetchone()
        except duckdb.InvalidInputException:
            raise BadInputError(
                path, f"traceEvents[{event_id}] ({event_label(None, name)}) has a %-escape that is not UTF-8"
            ) from None


def describe_unreadable_events(con: duckdb.DuckDBPyConnection, events_file: str) -> str | None:
    """Why DuckDB could not read the ``traceEvents`` array in ``events_file`` (one JSON array), or None.

    Called only after ingest failed: it reads the array again, each element as raw JSON, and finds the
    first element that is not an object or whose ``ts``/``dur`` is not a number of microseconds (whose
    nanoseconds fit 64 bits, until the year 2262 from 1970, where the event is one validate.sql's rules hold).
    """
    # ingest.sql's DECIMAL(38,3) microseconds, whose nanoseconds must fit BIGINT on the events validate.sql's rules hold
    held = HELD_TO_RULES.format(c="e->>'cat'")
    number = (
        "CASE WHEN TRY_CAST(e->>'{0}' AS DECIMAL(38,3)) IS NULL THEN coalesce(json_type(e->'{0}') <> 'NULL', false)"
        " ELSE abs(TRY_CAST(e->>'{0}' AS DECIMAL(38,3))) > 9223372036854775.807"
        f" AND coalesce({held}, false) END"
    )
    # a key ingest.sql reads, twice in an event: DuckDB's reader refuses the event (JSON has no rule for which counts)
    twice = (
        "(SELECT k FROM (SELECT unnest(json_keys(e)) AS k) WHERE k IN ('ph', 'cat', 'name', 'pid', 'tid', 'ts', 'dur',"
        " 'args', 'id') GROUP BY k HAVING count(*) > 1 ORDER BY k LIMIT 1)"
    )
    query = f"""
        SELECT i, json_type(e), e->>'cat', e->>'name', e->'ts', e->'dur',
               {number.format("ts")} AS bad_ts, {number.format("dur")} AS bad_dur, twice
        FROM (SELECT *, CASE WHEN json_type(e) = 'OBJECT' THEN {twice} END AS twice
              FROM (SELECT row_number() OVER () - 1 AS i, json AS e
                    FROM read_json(?, format = 'array', records = 'false', columns = {{json: 'JSON'}})))
        WHERE json_type(e) NOT IN ('OBJECT', 'NULL') OR twice IS NOT NULL OR {number.format("ts")}
              OR {number.format("dur")}
        ORDER BY i LIMIT 1
    """
    try:
        row = con.execute(query, [events_file]).fetchone()
    except duckdb.Error:
        return None
    if row is None:
        return None
    index, kind, cat, name, ts, dur, bad_ts, bad_dur, twice = row
    if kind != "OBJECT":
        return f"traceEvents[{index}] is a JSON {JSON_TYPES.get(kind, kind.lower())}, not an event object"
    what = event_label(cat, name)
    if twice is not None:
        return f"traceEvents[{index}]{f' ({what})' if what else ''} has the key {_short(repr(twice), NAME_CHARS)} twice"
    field, value = ("ts", ts) if bad_ts else ("dur", dur)
    return (
        f"traceEvents[{index}]{f' ({what})' if what else ''} has {field} {_short(value, VALUE_CHARS)}, "
        "not a number of microseconds"
    )


def event_label(cat: str | None, name: str | None) -> str:
    """An event's category and (shortened, quoted) name, as far as it has them."""
    return " ".join(part for part in (cat, _short(repr(name), NAME_CHARS) if name is not None else None) if part)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
