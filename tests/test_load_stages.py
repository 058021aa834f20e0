"""benchmarks/load_stages.py: a load timed stage by stage gives the rows of an untimed one, times every statement of
the attribution's SQL files on its own, and leaves the analyzer as it found it."""

import sys

from conftest import REPO
from kernelscope.analyzer import held, ingest, load_run, rank_parts

sys.path.insert(0, str(REPO / "benchmarks"))
import load_stages  # noqa: E402

TRACE = REPO / "sample_traces" / "transformer_encoder"
ROWS = "SELECT * FROM kernels ORDER BY event_id"


def test_a_timed_load_gives_the_same_rows_and_times_each_stage():
    with load_run(TRACE) as untimed:
        expected = untimed.sql(ROWS)

    def patched():
        steps = (rank_parts.run_sql_file, rank_parts.ingest_trace, rank_parts.validate_events)
        return (*steps, rank_parts.hold_spans, held.run_sql_file, ingest.native_reader, ingest._load_part)

    originals = patched()
    with load_stages.timed() as stages, load_run(TRACE) as timed:
        rows = timed.sql(ROWS)
    assert rows.equals(expected)
    assert patched() == originals
    report = stages.as_dict(total=10.0)
    wall = report["wall"]
    for stage in ("connect", "ingest", "validate.sql", "attribution.sql", "other"):
        assert wall[stage] > 0, stage
    # every table the attribution's files make is a stage of its own, and together they are each file's time
    for stage in (
        "attribution.sql/ks_launches",
        "attribution.sql/ks_items",
        "attribution_rows.sql/ks_rows",
        "attribution_rows.sql/kernels",
    ):
        assert stage in wall, stage
    assert wall[load_stages.HELD] > 0
    for name in ("attribution.sql", "attribution_rows.sql"):
        statements = {stage: seconds for stage, seconds in wall.items() if stage.startswith(f"{name}/")}
        assert sum(statements.values()) <= wall[name]
        # most of the file's time is in its statements: the rest, guards and Python between them, stretches on a
        # busy machine (0.93 of it seen at load average 8), so this only catches statements left untimed
        assert sum(statements.values()) > 0.5 * wall[name]
    assert report["threads"]["ingest: load a part (all threads)"] > 0
    # the cutting thread's own CPU beside its wall time, most of which it waits for loaders to free a slot
    assert report["threads"][load_stages.CUTTING_THREAD] >= wall[load_stages.CUT]  # the timer around the same call
    assert report["cpu"][load_stages.CUTTING_THREAD] >= 0
    assert abs(sum(v for k, v in wall.items() if "/" not in k) - 10.0) < 1e-3  # "other" is what the rest leaves
