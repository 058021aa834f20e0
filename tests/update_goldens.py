"""Rewrite the golden files (tests/golden/) after an intended change of results; never run by the tests, which
only read them. Review the diff (git diff tests/golden) before committing it.

    python tests/update_goldens.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from conftest import REPO, SAMPLE_RUNS  # noqa: E402
from kernelscope.analyzer import Archive, archive_runs, load_run  # noqa: E402
from test_sample_traces import GOLDEN, golden_summary, snapshot  # noqa: E402
from test_sql_reference import ARCHIVED, SEPARATOR, golden_parts, table_text  # noqa: E402
from test_sql_reference import GOLDEN as SQL_GOLDEN  # noqa: E402


def main() -> None:
    GOLDEN.mkdir(exist_ok=True)
    written = []
    for run_dir in SAMPLE_RUNS:
        with load_run(run_dir) as run:
            golden_summary(run_dir).write_text(snapshot(run))
        written.append(golden_summary(run_dir))
    with tempfile.TemporaryDirectory() as tmp, load_run(REPO / "sample_traces" / "demo") as run:
        archive_runs([REPO / p for p in ARCHIVED], Path(tmp) / "archive")
        with Archive(Path(tmp) / "archive") as archive:
            for path in sorted(SQL_GOLDEN.glob("*.golden")):
                head, query, _expected = golden_parts(path)
                source = run if path.name.startswith("run.") else archive
                path.write_text(head + SEPARATOR + table_text(source.sql(query)))
                written.append(path)
    print(f"{len(written)} golden files written; review them: git diff {GOLDEN.relative_to(REPO)}")


if __name__ == "__main__":
    main()
