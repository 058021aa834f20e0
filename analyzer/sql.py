"""Run the ``.sql`` files that sit beside this module."""

from __future__ import annotations

import re
import sys
import weakref
from collections.abc import Mapping
from functools import cache
from importlib import resources
from string import Template

import duckdb

from .rundir import MODULE_SEPARATOR, SAMPLE_SEPARATOR


@cache
def sql_text(name: str) -> str:
    # the package itself, not its name: a name is imported, which waits for the package's import to end, and
    # connection.prepare() reads the files on a thread while the package imports
    return resources.files(sys.modules[__package__]).joinpath(name).read_text(encoding="utf-8")


# A comment, or a string literal or quoted name (which may hold "--" or "/*" as text), in a .sql file.
_COMMENT_OR_QUOTED = re.compile(r"--[^\n]*|/\*.*?\*/|'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"", re.S)


@cache
def sql_template(name: str) -> Template:
    """The ``.sql`` file ``name`` as a Template of its ``${key}`` placeholders, less its comments: a value holding a
    newline (a path, a call's name), filled into a comment that names its placeholder, would end it and run as SQL."""
    text = _COMMENT_OR_QUOTED.sub(lambda found: "" if found[0][:2] in ("--", "/*") else found[0], sql_text(name))
    return Template(text)


def quote(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


# Each file's statements as DuckDB parsed them, for the process: DuckDB 2.0's parser takes a tenth of a small
# trace's attribution (attribution.sql: 12 ms to parse on a 2-core machine), and a parsed statement is copied, not
# parsed again, each time it runs.
_parsed: dict[str, list[duckdb.Statement]] = {}
# A statement whose leading comment holds a line "-- run if: <expression>" runs only where that SQL boolean, read
# when its turn comes, is true: a step whose input is empty on most traces then costs a SELECT instead of its
# plan's operators, each of which costs a fixed part of a millisecond however few its rows (benchmarks/RESULTS.md).
# Of several such lines all must hold, each asked only where those above it held, so that a later one may read a
# table which only the statements an earlier one's truth runs make.
_GUARD = re.compile(r"--\s*run if:\s*(.+?)\s*$")
_guards: dict[str, list[str | None]] = {}  # each file's statements' first guards, by position
_later_guards: dict[str, list[tuple[str, ...]]] = {}  # each file's statements' other guards, by position
# The DROP statements held back on a connection (hold_drops), by their text.
_held: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, dict[str, duckdb.Statement]] = weakref.WeakKeyDictionary()


# The statements the analyzer gives as text (not a file's), parsed once per process: a load runs the same few each
# time (its settings read, the sample ids checked, profiling_df's query, its connection's clean-up), whose parse cost
# a small trace ~0.05-0.15 ms each, as much as a third of running one.
MAX_TEXTS = 256  # a text that holds a value (a setting's amount) differs between loads: those past this are not kept
_texts: dict[str, duckdb.Statement] = {}


def execute(con: duckdb.DuckDBPyConnection, text: str, parameters: object = None) -> duckdb.DuckDBPyConnection:
    """``con.execute(text, parameters)`` of the one statement ``text``, parsed once per process; returns ``con``."""
    statement = _texts.get(text)
    if statement is None:
        (statement,) = con.extract_statements(text)
        if len(_texts) < MAX_TEXTS:
            _texts[text] = statement
    return con.execute(statement, parameters)


def parsed_statements(con: duckdb.DuckDBPyConnection, name: str) -> list[duckdb.Statement]:
    """The statements of file ``name``, parsed once per process (by ``con``, the first time)."""
    statements = _parsed.get(name)
    if statements is None:
        statements = _parsed.setdefault(name, con.extract_statements(sql_text(name)))
    return statements


def statement_guards(statement: duckdb.Statement) -> tuple[str, ...]:
    """The expressions of the statement's "-- run if:" lines, in order, those its leading comment holds."""
    guards = []
    for line in statement.query.lstrip().splitlines():
        if not line.strip():  # a blank line between paragraphs of the comment (a file's head and its first step's)
            continue
        if not line.startswith("--"):
            break
        guard = _GUARD.match(line)
        if guard:
            guards.append(guard.group(1))
    return tuple(guards)


def statement_guard(statement: duckdb.Statement) -> str | None:
    """The expression of the statement's first "-- run if:" line, if its leading comment holds one."""
    return next(iter(statement_guards(statement)), None)


def _statement_guards(con: duckdb.DuckDBPyConnection, name: str) -> list[str | None]:
    guards = _guards.get(name)
    if guards is None:
        guards = _guards[name] = [statement_guard(s) for s in parsed_statements(con, name)]
    return guards


def _statement_later_guards(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[str, ...]]:
    later = _later_guards.get(name)
    if later is None:
        later = _later_guards[name] = [statement_guards(s)[1:] for s in parsed_statements(con, name)]
    return later


def runs(con: duckdb.DuckDBPyConnection, guard: str | None) -> bool:
    """Whether a statement with ``guard`` (statement_guard) runs on ``con`` now."""
    return guard is None or bool(con.execute(_question(con, (guard,))).fetchone()[0])


def _question(con: duckdb.DuckDBPyConnection, guards: tuple[str, ...]) -> duckdb.Statement:
    """The SELECT of ``guards``, one column each."""
    question = _questions.get(guards)
    if question is None:  # parsed once per process, as the files' statements are (a third of a small SELECT's cost)
        question = _questions[guards] = con.extract_statements(f"SELECT {', '.join(guards)}")[0]
    return question


_questions: dict[tuple[str, ...], duckdb.Statement] = {}  # each SELECT of guards, parsed

# A guard that reads variables alone (no subquery, nor any function or macro that could hide one) has the same answer
# from where an earlier one is asked until a statement sets one of its variables: such guards are asked together, each
# statement costing a small trace a fixed part of a millisecond (attribution.sql: five guards, two SELECTs).
_READS_A_VARIABLE = re.compile(r"getvariable\s*\(\s*'(\w+)'\s*\)", re.IGNORECASE)
_READS_MORE = re.compile(r"\b(SELECT|FROM)\b|\w\s*\(", re.IGNORECASE)  # a subquery, or a call of anything else
_SETS_A_VARIABLE = re.compile(r"^\s*SET\s+VARIABLE\s+(\w+)", re.IGNORECASE)
_together: dict[str, list[tuple[int, ...] | None]] = {}  # each file's guards asked together, by the first's position


def variables_read(guard: str) -> frozenset[str] | None:
    """The variables ``guard`` reads, where it reads nothing else that a statement may change; else None."""
    names = frozenset(name.lower() for name in _READS_A_VARIABLE.findall(guard))
    return names if names and not _READS_MORE.search(_READS_A_VARIABLE.sub("", guard)) else None


def variables_set(statement: duckdb.Statement) -> frozenset[str] | None:
    """The variables ``statement`` may set: none for a statement that is no SET; None (any) for a SET other than
    ``SET VARIABLE name`` (RESET VARIABLE, a setting's SET: taken as any, so the guards after it are asked again)."""
    if statement.type != duckdb.StatementType.SET:
        return frozenset()
    code = [line for line in statement.query.strip().splitlines() if not line.lstrip().startswith("--")]
    named = _SETS_A_VARIABLE.match("\n".join(code))
    return frozenset((named.group(1).lower(),)) if named else None


def guards_asked_together(statements: list[duckdb.Statement], guards: list[str | None]) -> list[tuple[int, ...] | None]:
    """For each statement, the positions of the guards asked in one SELECT when its guard is asked (its own first),
    or None where its guard is asked with an earlier one's or it has none. Only guards of variables alone join an
    earlier one, and only while no statement from that one's on sets a variable they read."""
    together: list[tuple[int, ...] | None] = [None] * len(guards)
    asked: set[int] = set()
    for first, guard in enumerate(guards):
        if guard is None or first in asked:
            continue
        group, read = [first], variables_read(guard)
        if read is not None:
            changed: frozenset[str] | None = frozenset()
            for later in range(first + 1, len(guards)):
                set_before = variables_set(statements[later - 1])
                changed = None if changed is None or set_before is None else changed | set_before
                if changed is None:
                    break
                later_read = variables_read(guards[later]) if guards[later] is not None else None
                if later not in asked and later_read is not None and not later_read & changed:
                    group.append(later)
        asked.update(group)
        together[first] = tuple(group)
    return together


def _guards_together(con: duckdb.DuckDBPyConnection, name: str) -> list[tuple[int, ...] | None]:
    together = _together.get(name)
    if together is None:
        together = _together[name] = guards_asked_together(parsed_statements(con, name), _statement_guards(con, name))
    return together


def parse_ahead(con: duckdb.DuckDBPyConnection, names: tuple[str, ...]) -> None:
    """Parse the files ``names`` and their guards now, as run_sql_file would at their first run."""
    for name in names:
        guards = _statement_guards(con, name)
        for positions in _guards_together(con, name):
            if positions is not None:
                _question(con, tuple(guards[p] for p in positions))


def run_sql_file(
    con: duckdb.DuckDBPyConnection,
    name: str,
    *,
    known: Mapping[str, bool] | None = None,
    answered: dict[str, bool] | None = None,
    **literals: str,
) -> duckdb.DuckDBPyConnection:
    """Execute every statement of ``name`` but those whose "-- run if:" guard is false (a file's last statement and
    the statements of a file with literals have none); ``${key}`` placeholders become quoted string literals (a file
    with none runs from its parsed statements). On a connection that holds its drops back (hold_drops), a DROP
    statement is kept for drop_held instead of run. ``known``: answers the caller already has, by guard text, which
    are then not asked (a SELECT each costs a small trace a fixed part of a millisecond). ``answered``: filled with the
    answers of the guards asked that read variables alone which no statement of the file sets from theirs on (the
    same at its end, for a later file's ``known``).

    Returns ``con``, holding the result of the last statement."""
    if literals:
        for statement in _filled_statements(con, name, literals):
            con.execute(statement)
        return con
    held, known = _held.get(con), known or {}
    guards, together = _statement_guards(con, name), _guards_together(con, name)
    later = _statement_later_guards(con, name)
    settled = _settled_guards(con, name) if answered is not None else ()
    answers: dict[int, object] = {}  # the guards asked ahead with an earlier one, by position
    for position, statement in enumerate(parsed_statements(con, name)):
        if held is not None and statement.type == duckdb.StatementType.DROP:
            held[statement.query] = statement
            continue
        guard = guards[position]
        if guard is not None:
            holds = _holds(con, guards, together, position, answers, known)
            if position in settled and guard not in known:
                answered[guard] = holds
            if not holds:
                continue
        if all(known[guard] if guard in known else runs(con, guard) for guard in later[position]):
            con.execute(statement)
    return con


_settled: dict[str, frozenset[int]] = {}  # each file's guards that read variables no statement sets from theirs on


def _settled_guards(con: duckdb.DuckDBPyConnection, name: str) -> frozenset[int]:
    """The positions of file ``name``'s first guards whose answers hold to its end (run_sql_file's ``answered``)."""
    settled = _settled.get(name)
    if settled is None:
        statements, guards = parsed_statements(con, name), _statement_guards(con, name)
        sets = [variables_set(statement) for statement in statements]
        settled = _settled[name] = frozenset(
            position
            for position, guard in enumerate(guards)
            if guard is not None
            and (read := variables_read(guard)) is not None
            and all(changed is not None and not changed & read for changed in sets[position:])
        )
    return settled


MAX_FILLED = 64  # the files filled with literals kept parsed: a load fills its few with the same values each time
_filled: dict[tuple[str, tuple[tuple[str, str], ...]], list[duckdb.Statement]] = {}


def _filled_statements(con: duckdb.DuckDBPyConnection, name: str, literals: Mapping[str, str]) -> list:
    """The statements of file ``name`` with its placeholders filled with ``literals``, parsed once per process for the
    values most loads fill in (ingest_scanned.sql's first id and rank: 0 and 0 for a small trace's one part, whose
    parse cost ~0.25 ms of its load)."""
    key = (name, tuple(sorted(literals.items())))
    statements = _filled.get(key)
    if statements is None:
        text = sql_template(name).safe_substitute({k: quote(v) for k, v in literals.items()})
        statements = con.extract_statements(text)
        if len(_filled) < MAX_FILLED:
            _filled[key] = statements
    return statements


def _holds(con, guards: list[str | None], together, position: int, answers: dict, known: Mapping[str, bool]) -> bool:
    """Whether the first guard at ``position`` holds: known to the caller, else asked (_answer)."""
    guard = guards[position]
    return known[guard] if guard in known else _answer(con, guards, together, position, answers)


def _answer(
    con, guards: list[str | None], together: list[tuple[int, ...] | None], position: int, answers: dict
) -> bool:
    """Whether the guard at ``position`` holds: asked now with those asked together with it, or answered ahead (alone
    where the guard it would have been asked with was known to the caller, not asked)."""
    if position not in answers:
        positions = together[position] or (position,)
        row = con.execute(_question(con, tuple(guards[p] for p in positions))).fetchone()
        answers.update(zip(positions, row, strict=True))
    return bool(answers.pop(position))


def hold_drops(con: duckdb.DuckDBPyConnection) -> None:
    """Keep the DROP statements of the files run on ``con`` from now on, to run with drop_held or never: the
    temporary tables they drop go with the connection (run_settings.py, keeps_steps)."""
    _held.setdefault(con, {})


def holds_drops(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` holds its DROP statements back (hold_drops)."""
    return con in _held


def forget_held(con: duckdb.DuckDBPyConnection) -> None:
    """Stop holding the DROP statements on ``con`` without running them (its temporary tables stay: connection.py)."""
    _held.pop(con, None)


def drop_held(con: duckdb.DuckDBPyConnection) -> None:
    """Run the DROP statements held back on ``con``, each once, and stop holding them."""
    for statement in _held.pop(con, {}).values():
        con.execute(statement)


def _path_struct(entry: tuple[str, str, str]) -> str:
    scope, path, module = map(quote, entry)
    return f"{{scope: {scope}, path: {path}, module: {module}}}"


def define_scope_names(
    con: duckdb.DuckDBPyConnection,
    module_prefix: str,
    function_prefix: str,
    graph_replay_call: str | None = None,
    compiled_region_call: str | None = None,
    other_operator_call: str | None = None,
    *,
    names_escaped: bool = False,
    torchscript_paths: list[tuple[str, str, str]] = (),
    macros: bool = True,
) -> None:
    """The variables and macros (scope_names.sql) by which the SQL files tell scopes apart and read names; the
    variables alone unless ``macros`` (a connection from connection.py has the macros).

    ``graph_replay_call``, ``compiled_region_call``: the call names of the kernels of a CUDA graph launch and of a
    compiled region that no call scope holds, in recordings that name them from the trace (manifest annotation,
    format 3); None (SQL NULL) elsewhere. ``other_operator_call``: where not None, the kernels no call scope holds
    are named after an operator (attribution.sql), this name for an operator without a namespace.
    ``names_escaped``: the scopes carry module and call names percent-escaped (rundir.scope_text), which the macros
    read back. ``torchscript_paths``: (TorchScript module, path inside it, module) of a recording's TorchScript
    modules (rundir.torchscript_paths), the modules their operators' Module Hierarchy names (attribution.sql)."""
    texts = (
        ("module_prefix", module_prefix),
        ("function_prefix", function_prefix),
        ("sample_separator", SAMPLE_SEPARATOR),
        ("module_separator", MODULE_SEPARATOR),
        ("graph_replay_call", graph_replay_call),
        ("compiled_region_call", compiled_region_call),
        ("other_operator_call", other_operator_call),
    )
    values = {name: None if value is None else quote(value) for name, value in texts}
    values["names_escaped"] = "true" if names_escaped else "false"
    paths = ", ".join(map(_path_struct, torchscript_paths))
    values["torchscript_paths"] = f"CAST([{paths}] AS STRUCT(scope VARCHAR, path VARCHAR, module VARCHAR)[])"
    held = _variables.setdefault(con, {})
    # a variable never set reads NULL; no path set reads as none, as torchscript_modules.sql runs only where some are
    never_set = {"torchscript_paths": values["torchscript_paths"]} if not torchscript_paths else {}
    wanted = {name: value for name, value in values.items() if held.get(name, never_set.get(name)) != value}
    text = "".join(
        f"SET VARIABLE {name} = {'CAST(NULL AS VARCHAR)' if value is None else value};"
        for name, value in wanted.items()
    ) + (sql_text("scope_names.sql") if macros else "")
    statements = _definitions.get(text)
    if statements is None:  # the same for every run of a scheme: parsed once, as the files are
        statements = con.extract_statements(text) if text else []
        if len(_definitions) < MAX_DEFINITIONS:
            _definitions[text] = statements
    for statement in statements:
        con.execute(statement)
    held.update(wanted)


MAX_DEFINITIONS = 64  # the variable definitions kept parsed: a process loads runs of a few schemes
_definitions: dict[str, list[duckdb.Statement]] = {}
# Each connection's variables as define_scope_names last set them (their SQL text, None for NULL): a SET VARIABLE
# costs a small trace ~0.1 ms (0.3 ms the empty list of TorchScript paths), and a new connection holds none, which
# getvariable() reads as NULL: only those that differ are set, and none again for the next rank of the same scheme.
_variables: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, dict[str, str | None]] = weakref.WeakKeyDictionary()
