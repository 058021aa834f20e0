"""Hostile run directories and archives, beside hostile_inputs_paths.py's paths: a run whose trace is a link to
/dev/urandom or a FIFO in it; manifest and samples.json numbers written as 1e400, -1e400, NaN, Infinity, -0,
1e-400, 2^70 and -2^70 (text Python's json reads, hostile_fields.py's values being what it writes); archive parts
(of kernels, events, runs and samples) that are a folder, hold another schema (a column renamed, or of another
type) or whose footer lies about its row count, read by runs, sql and an add, and a kernels part replaced over and
over while sql reads it; `archive` into a folder inside the run it archives; and analyze of a 100 MB trace with its
address space limited (RLIMIT_AS, as ulimit -v: the limits that fail lie between the imports' need and the load's,
~1.3-1.6 GiB on cpu2). Each case runs `kernelscope ...` in a process of its own, in a scratch folder.

    python benchmarks/hostile_inputs_runs.py [--only SUBSTRING] [--timeout 120]

The rule is hostile_inputs_more.py's (exit 0, or 2 and one line `kernelscope: error: …`, no traceback; exit 2
leaves the scratch folder as it was; nothing written outside it). Prints one line per case, then the count that
broke the rule (exit 1 if any).
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_inputs_more import KERNELSCOPE, REPO, RUN, _copy, arguments, run_all  # noqa: E402

sys.path.insert(0, str(REPO / "tests"))
from parquet_footers import row_count_lie  # noqa: E402

NUMBERS = ["1e400", "-1e400", "NaN", "Infinity", "-0", "1e-400", str(2**70), str(-(2**70))]
MANIFEST_NUMBERS = ['"format_version": 1', '"rank": 0', '"world_size": 1', '"warmup_iterations": 3',
                    '"samples_per_pass": 1', '"bytes": 52054016', '"limit_bytes": 4194304']  # fmt: skip
SAMPLES_NUMBERS = ['"sample_id":0', '"calls":1', '"tensor_bytes":8527872', '"shape":[64', '"nbytes":131072']
TABLES = ("kernels", "events", "runs", "samples")
READERS = {
    "runs": lambda archive: ["runs", archive],
    "sql": lambda archive: ["sql", archive, "SELECT count(*) FROM kernels"],
    "add": lambda archive: ["archive", str(REPO / "sample_traces" / "resnet50"), "--to", archive],
}
LIMITS_MIB = (1300, 1400, 1500, 1600, 2000)
scratch_outside = Path()  # main's: the base archive and the trace, made once, outside every case's folder


def _run_with(change) -> callable:
    """analyze of a copy of the run that ``change(run)`` damaged."""

    def case(work: Path) -> list[str]:
        run = _copy(work)
        change(run)
        return ["analyze", str(run)]

    return case


def _linked_trace(target: str):
    def change(run: Path) -> None:
        (run / "trace.json.gz").unlink()
        os.symlink(target, run / "trace.json.gz")

    return change


def _fifo_trace(run: Path) -> None:
    (run / "trace.json.gz").unlink()
    os.mkfifo(run / "trace.json.gz")


def _number(file: str, old: str, value: str, command: str = "analyze") -> callable:
    """``command`` on a copy of the run whose ``file`` has ``old``'s number (after its colon, or a list's first)
    written as ``value``."""

    def case(work: Path) -> list[str]:
        run = _copy(work)
        text = (run / file).read_text()
        assert old in text, old
        key, number = old.rsplit(":", 1)
        opening = number[: len(number) - len(number.lstrip(" ["))]
        (run / file).write_text(text.replace(old, f"{key}:{opening}{value}", 1))
        if command == "archive":
            return ["archive", str(run), "--to", str(work / "A")]
        return [command, str(run)]

    return case


def _base_archive() -> Path:
    base = scratch_outside / "archive"
    if not base.exists():
        subprocess.run([KERNELSCOPE, "archive", str(RUN), "--to", str(base)], check=True, capture_output=True)
    return base


def _part(archive: Path, table: str) -> Path:
    (part,) = (archive / table).rglob("*.parquet")
    return part


def _as_folder(part: Path) -> None:
    part.unlink()
    part.mkdir()
    (part / "x.parquet").write_bytes(b"")


def _other_schema(part: Path) -> None:
    """The part rewritten with its first column renamed and its last cast to text."""
    table = pq.read_table(part)
    table = table.rename_columns([f"{table.column_names[0]}_x", *table.column_names[1:]])
    last = table.column_names[-1]
    table = table.set_column(table.num_columns - 1, last, table.column(last).cast(pa.string()))
    pq.write_table(table, part)


def _archive_with(table: str, damage, reader: str) -> callable:
    def case(work: Path) -> list[str]:
        archive = work / "A"
        shutil.copytree(_base_archive(), archive, symlinks=True)
        damage(_part(archive, table))
        return READERS[reader](str(archive))

    return case


class _Flipper:
    """A kernels part replaced, by rename, with garbage and back, over and over, until the case ends."""

    def __init__(self):
        self.stop, self.thread = threading.Event(), None

    def case(self, work: Path) -> list[str]:
        archive = work / "A"
        shutil.copytree(_base_archive(), archive, symlinks=True)
        part, flips = _part(archive, "kernels"), Path(tempfile.mkdtemp(dir=scratch_outside))
        good, bad = part.read_bytes(), b"PAR1 not a Parquet file PAR1"
        self.stop = stop = threading.Event()

        def flip() -> None:
            while not stop.is_set():
                for data in (bad, good):
                    (flips / "next").write_bytes(data)
                    os.replace(flips / "next", part)

        self.thread = threading.Thread(target=flip, daemon=True)
        self.thread.start()
        return ["sql", str(archive), "SELECT count(*), sum(kernel_us) FROM kernels"]

    def judge(self, name: str, work: Path, code) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
            self.thread = None
        return None


def _inside_run(where: str) -> callable:
    def case(work: Path) -> list[str]:
        run = _copy(work)
        return ["archive", str(run), "--to", where.format(run=run)]

    return case


def _limited_analyze(limit_mib: int) -> callable:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit_mib << 20, limit_mib << 20))

    def case(work: Path) -> tuple[list[str], dict]:
        trace = scratch_outside / "gpt2-100m.json"
        if not trace.exists():
            scale = [sys.executable, str(REPO / "benchmarks" / "scale_trace.py"), str(REPO / "sample_traces" / "gpt2")]
            subprocess.run([*scale, str(trace), "--size", "100MB"], check=True, capture_output=True)
        return ["analyze", str(trace)], {"preexec_fn": limit}

    return case


def cases(flipper: _Flipper) -> dict[str, callable]:
    made = {
        "a run whose trace links to /dev/urandom": _run_with(_linked_trace("/dev/urandom")),
        "a run whose trace is a FIFO": _run_with(_fifo_trace),
    }
    for old in MANIFEST_NUMBERS:
        for value in NUMBERS:
            for command in ("analyze", "archive"):
                made[f"{command} of manifest {old.split(':')[0]} {value}"] = _number(
                    "manifest.json", old, value, command
                )
    for old in SAMPLES_NUMBERS:
        for value in NUMBERS:
            made[f"analyze of samples.json {old.split(':')[0]} {value}"] = _number("samples.json", old, value)
    damages = {"a folder": _as_folder, "another schema": _other_schema, "a row count 1000x": row_count_lie}
    for table in TABLES:
        for what, damage in damages.items():
            for reader in READERS:
                made[f"{reader} of an archive whose {table} part is {what}"] = _archive_with(table, damage, reader)
    for round_ in range(10):
        made[f"sql of an archive whose kernels part is replaced while read ({round_})"] = flipper.case
    made["archive --to a folder inside the run"] = _inside_run("{run}/A")
    made["archive --to the run itself"] = _inside_run("{run}")
    made["archive --to a folder under the run's trace"] = _inside_run("{run}/trace.json.gz/A")
    for limit in LIMITS_MIB:
        made[f"analyze of a 100 MB trace under RLIMIT_AS {limit} MiB"] = _limited_analyze(limit)
    return made


def main() -> int:
    global scratch_outside
    args = arguments("Hostile run directories and archives, and analyze under an address space limit.")
    flipper = _Flipper()
    with (
        tempfile.TemporaryDirectory() as scratch,
        tempfile.TemporaryDirectory(prefix="hostile-runs-", ignore_cleanup_errors=True) as made,
    ):
        scratch_outside = Path(made)
        try:
            return run_all(cases(flipper), args.only, args.timeout, Path(scratch), judge=flipper.judge)
        finally:
            flipper.judge("", Path(scratch), None)  # a flipping thread stopped, whatever ended the cases


if __name__ == "__main__":
    sys.exit(main())
