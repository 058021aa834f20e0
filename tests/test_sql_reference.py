"""The SQL reference: a golden file per table and view (its query and expected table, on sample runs),
and a check that every table, view and column a user can query is documented in docs/sql.md.

The goldens are reviewed files that a test run only reads: `python tests/update_goldens.py` rewrites the expected
tables after an intended change."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO
from kernelscope.analyzer import Archive, archive_runs, load_run

GOLDEN = Path(__file__).parent / "golden" / "sql"
SEPARATOR = "----\n"
REFERENCE = REPO / "docs" / "sql.md"
ARCHIVED = ["sample_traces/mlp", "sample_traces/demo"]


@pytest.fixture(scope="module")
def run():
    with load_run(REPO / "sample_traces" / "demo") as loaded:
        yield loaded


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    path = tmp_path_factory.mktemp("reference") / "archive"
    archive_runs([REPO / p for p in ARCHIVED], path)
    with Archive(path) as store:
        yield store


def table_text(frame: pd.DataFrame) -> str:
    def cell(value):
        return "[" + ", ".join(str(v) for v in value) + "]" if isinstance(value, (list, np.ndarray)) else value

    return frame.map(cell).to_csv(index=False, float_format="%.3f", lineterminator="\n")


def golden_parts(path: Path) -> tuple[str, str, str]:
    text = path.read_text()
    head, _, expected = text.partition(SEPARATOR)
    source = head.splitlines()[0]
    assert source.startswith(("-- run: sample_traces/demo", "-- archive: " + ", ".join(ARCHIVED))), path
    return head, head.split("\n", 1)[1], expected


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("*.golden")), ids=lambda p: p.stem)
def test_golden(path, request):
    _head, query, expected = golden_parts(path)
    source = request.getfixturevalue("run" if path.name.startswith("run.") else "archive")
    actual = table_text(source.sql(query))
    assert actual == expected, f"{path.name}: the view's output changed (python tests/update_goldens.py, then review)"


def _sections() -> dict[tuple[str, bool], str]:
    """docs/sql.md's sections headed ``## `name` `` (a run's) or ``### `name` (archive)``, by (name, archive)."""
    sections, key, lines = {}, None, []
    for line in REFERENCE.read_text().splitlines():
        match = re.match(r"^#{2,3} `(\w+)`( \(archive\))?", line)
        if match or line.startswith("#"):
            if key:
                sections[key] = "\n".join(lines)
            key, lines = ((match.group(1), bool(match.group(2))) if match else None), []
        elif key:
            lines.append(line)
    if key:
        sections[key] = "\n".join(lines)
    return sections


def _relations(con) -> list[str]:
    rows = con.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()
    return sorted(name for (name,) in rows)


@pytest.mark.parametrize("flavor", ["run", "archive"])
def test_every_table_view_and_column_is_documented_and_has_a_golden_file(flavor, request):
    source = request.getfixturevalue(flavor)
    sections = _sections()
    names = _relations(source.con)
    assert {"events", "kernels", "samples"} <= set(names)
    for name in names:
        section = sections.get((name, flavor == "archive")) or sections.get((name, False))
        assert section is not None, f"docs/sql.md documents no {flavor} table or view {name!r}"
        for column in source.sql(f"DESCRIBE {name}")["column_name"]:
            documented = f"`{column}`" in section or f"`{column}`" in sections.get((name, False), "")
            assert documented, f"docs/sql.md: column {column!r} of {flavor} {name!r} is undocumented"
        assert (GOLDEN / f"{flavor}.{name}.golden").is_file(), f"no golden test for {flavor} {name!r}"
