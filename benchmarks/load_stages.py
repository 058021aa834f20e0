"""Where a load_run's wall time goes, stage by stage: timers put around the analyzer's own functions (in process).

``timed()`` patches the analyzer's functions with timers for the duration of a ``with`` block: the connection,
the memory settings, the ingest (and inside it the cutting or decompressing thread's time to hand out each part,
with that thread's own CPU beside it: the rest of its wall time it waits for a loading thread to free a slot; the
native reader's scans and the inserts, summed over the loading threads, with the time they waited for a free
part), validate.sql, each statement of the attribution's files (attribution.sql, held_by_sql.sql,
attribution_rows.sql) on its own (split by DuckDB's own parser), held.py's step (the native sweep, or held_by_sql.sql),
and the statements of the other SQL files by file. What the timers do not cover is "other". analyzer_throughput.py's
child reports them for the kernelscope step where KS_BENCH_STAGES is set (analyzer_cores.py --stages).

    python benchmarks/load_stages.py TRACE [--repeat 3] [--threads N]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import resource
import threading
import time
from collections import defaultdict
from contextlib import contextmanager

# the attribution's files whose statements are timed one by one, by the table or variable they make
STATEMENT_TIMED = ("attribution.sql", "held_by_sql.sql", "attribution_rows.sql")
CUT = "ingest/cut and hand out parts (one thread)"
CUTTING_THREAD = "ingest: the cutting thread (its CPU: its own work)"
HELD = "held spans (held.py: the native sweep, or held_by_sql.sql)"
_MADE = re.compile(r"(?:TABLE|VARIABLE)\s+(\w+)", re.IGNORECASE)


class Stages:
    """Wall seconds per stage; ``summed`` stages add up the time of several threads (more than the wall time)."""

    def __init__(self) -> None:
        self.ran: dict[str, int] = defaultdict(int)  # the most threads that used CPU during the stage
        self.peak_rss: dict[str, int] = {}  # the process's peak RSS when the stage ended (the first time)
        self.cpu: dict[str, float] = defaultdict(float)
        self.wall: dict[str, float] = defaultdict(float)
        self.summed: dict[str, float] = defaultdict(float)
        self.lock = threading.Lock()

    def add(
        self, name: str, seconds: float, *, summed: bool = False, cpu: float | None = None, ran: int | None = None
    ) -> None:
        with self.lock:
            if ran is not None:
                self.ran[name] = max(self.ran[name], ran)
            if not summed:
                self.peak_rss.setdefault(name, _peak_rss())
            (self.summed if summed else self.wall)[name] += seconds
            if cpu is not None:
                self.cpu[name] += cpu

    def as_dict(self, total: float | None = None) -> dict:
        wall = dict(self.wall)
        if total is not None:
            top = sum(v for k, v in wall.items() if "/" not in k)
            wall["other"] = total - top
        return {
            "wall": {k: round(v, 4) for k, v in wall.items()},
            "cpu": {k: round(v, 4) for k, v in self.cpu.items()},
            "threads": {k: round(v, 4) for k, v in self.summed.items()},
            "threads_ran": dict(self.ran),
            "peak_rss": dict(self.peak_rss),
        }


def _process_cpu() -> float:
    """User and system seconds of every thread of the process."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _thread_ticks() -> dict[str, int]:
    """Each thread of the process: its user and system clock ticks so far (Linux; empty elsewhere)."""
    ticks = {}
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return ticks
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        ticks[task] = int(fields[11]) + int(fields[12])
    return ticks


def _peak_rss() -> int:
    """The process's peak resident memory so far, in bytes (VmHWM; 0 where /proc has none)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _threads_that_ran(before: dict[str, int]) -> int:
    """How many threads used CPU since ``before`` (a tick is 10 ms: a thread that ran less may not count)."""
    return sum(1 for task, ticks in _thread_ticks().items() if ticks > before.get(task, ticks))


def _wrap(owner, name: str, stages: Stages, stage: str, *, summed: bool = False, undo: list) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed_call(*args, **kwargs):
        # a stage on several threads at once: its own thread's CPU; else the process's, all threads
        clock = time.thread_time if summed else _process_cpu
        ticks = None if summed else _thread_ticks()
        start, cpu = time.perf_counter(), clock()
        try:
            return original(*args, **kwargs)
        finally:
            ran = None if summed else _threads_that_ran(ticks)
            stages.add(stage, time.perf_counter() - start, summed=summed, cpu=clock() - cpu, ran=ran)

    setattr(owner, name, timed_call)
    undo.append((owner, name, original))


@contextmanager
def timed():
    """A Stages that the analyzer's functions add their times to while the block runs."""
    import duckdb
    from kernelscope.analyzer import event_array, held, ingest, rank_parts, run, sql, validate  # noqa: F401

    stages = Stages()
    undo: list = []
    _wrap(run.connection, "connect", stages, "connect", undo=undo)
    _wrap(run, "limit_memory", stages, "memory settings", undo=undo)
    _wrap(rank_parts, "ingest_trace", stages, "ingest", undo=undo)
    _wrap(ingest, "split_event_array", stages, CUT, undo=undo)
    # the same call on its own thread's clock: the stage's wall time is mostly its wait for a free slot
    _wrap(ingest, "split_event_array", stages, CUTTING_THREAD, summed=True, undo=undo)
    _wrap(ingest, "_load_part", stages, "ingest: load a part (all threads)", summed=True, undo=undo)
    _wrap(ingest._NativeInserts, "insert", stages, "ingest: insert (all threads)", summed=True, undo=undo)
    _wrap(ingest._NativeInserts, "_end", stages, "ingest/commit", undo=undo)
    if ingest.native_reader is not None:
        scan = ingest.native_reader.scan

        class Reader:  # the C module's attribute cannot be replaced; ingest reads it off this stand-in
            pass

        reader = Reader()
        for attr in dir(ingest.native_reader):
            if not attr.startswith("__"):
                setattr(reader, attr, getattr(ingest.native_reader, attr))
        reader.scan = scan
        original_module = ingest.native_reader
        ingest.native_reader = reader
        _wrap(reader, "scan", stages, "ingest: native scan (all threads)", summed=True, undo=undo)
        undo.append((ingest, "native_reader", original_module))
    _wrap(rank_parts, "validate_events", stages, "validate.sql", undo=undo)
    original_run_sql_file = rank_parts.run_sql_file

    def run_sql_file(con, name, *, known=None, answered=None, within="", **literals):
        known = known or {}
        if name not in STATEMENT_TIMED:
            ticks, start, cpu = _thread_ticks(), time.perf_counter(), _process_cpu()
            try:
                return original_run_sql_file(con, name, known=known, answered=answered, **literals)
            finally:
                stages.add(
                    within + name, time.perf_counter() - start, cpu=_process_cpu() - cpu, ran=_threads_that_ran(ticks)
                )
        file = name
        text = sql.Template(sql.sql_text(name)).safe_substitute({k: sql.quote(v) for k, v in literals.items()})
        whole, whole_cpu = time.perf_counter(), _process_cpu()
        name = within + name  # the stage's name from here on
        settled = sql._settled_guards(con, file) if answered is not None else ()
        statements = con.extract_statements(text)  # parsed once here, the timers' own cost
        stages.add(f"{name}/(split into statements)", time.perf_counter() - whole)
        held = sql._held.get(con)
        for position, statement in enumerate(statements):
            if held is not None and statement.type == duckdb.StatementType.DROP:  # held back, as the load holds it
                held[statement.query] = statement
                continue
            guards = sql.statement_guards(statement)
            if guards:
                asked = time.perf_counter()
                first = known[guards[0]] if guards[0] in known else sql.runs(con, guards[0])
                if position in settled and guards[0] not in known:
                    answered[guards[0]] = first
                skipped = not first or not all(
                    known[guard] if guard in known else sql.runs(con, guard) for guard in guards[1:]
                )
                stages.add(f"{name}/(run if)", time.perf_counter() - asked)
                if skipped:
                    continue
            query = str(statement.query)
            made = _MADE.search(re.sub(r"--[^\n]*", "", query))
            label = f"{name}/{made.group(1) if made else query.split()[0]}"
            counted = time.perf_counter()
            ticks = _thread_ticks()
            start, cpu = time.perf_counter(), _process_cpu()
            con.execute(statement)
            wall, cpu = time.perf_counter() - start, _process_cpu() - cpu
            ran = _threads_that_ran(ticks)
            stages.add(label, wall, cpu=cpu, ran=ran)
            stages.add(f"{name}/(the timers' own cost)", time.perf_counter() - counted - wall)
        stages.add(name, time.perf_counter() - whole, cpu=_process_cpu() - whole_cpu)
        return con

    rank_parts.run_sql_file = run_sql_file
    held.run_sql_file = functools.partial(run_sql_file, within=f"{HELD}/")
    undo.append((rank_parts, "run_sql_file", original_run_sql_file))
    undo.append((held, "run_sql_file", original_run_sql_file))
    _wrap(rank_parts, "hold_spans", stages, HELD, undo=undo)
    try:
        yield stages
    finally:
        for owner, name, original in reversed(undo):
            setattr(owner, name, original)


def print_stages(report: dict, total: float) -> None:
    print(f"{'stage':<58} {'wall s':>8} {'share':>6} {'CPU s':>7} {'threads ran':>11} {'peak RSS MB':>11}")
    for name, seconds in report["wall"].items():
        cpu, ran, rss = (report[key].get(name) for key in ("cpu", "threads_ran", "peak_rss"))
        print(
            f"{name:<58} {seconds:8.3f} {seconds / total:6.1%} {'' if cpu is None else format(cpu, '7.3f')}"
            f" {'' if ran is None else format(ran, '11d')} {'' if not rss else format(rss / 1e6, '11.0f')}"
        )
    for name, seconds in report["threads"].items():
        print(f"{name:<58} {seconds:8.3f}        {report['cpu'][name]:7.3f} (summed over threads)")
    print(f"{'total':<58} {total:8.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--threads", type=int, help="DuckDB threads (default: DuckDB's, the machine's cores)")
    args = parser.parse_args(argv)
    from kernelscope.analyzer import connection, load_run

    if args.threads:
        made = connection.connect

        def connect(*a, **k):
            con = made(*a, **k)
            con.execute(f"SET threads = {args.threads}")
            return con

        connection.connect = connect
    for _ in range(args.repeat):
        with timed() as stages:
            start = time.perf_counter()
            loaded = load_run(args.trace)
            total = time.perf_counter() - start
        print_stages(stages.as_dict(total), total)
        loaded.close()


if __name__ == "__main__":
    main()
