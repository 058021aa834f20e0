"""load_run's throughput on a large scaled trace against the number of cores, beside orjson.loads of the same file.

scale_trace.py writes the scaled real trace (--source, default sample_traces/gpt2, to --size of JSON; with --gzip
its .json.gz too). For each core count (--cores, default 1,2,4,8,16, those above the cores this process may use
left out), load_run runs in a child process pinned to that many cores (sched_setaffinity) with DuckDB's threads,
and so the reader's, set to as many (analyzer_throughput.py's child, KS_BENCH_CORES); orjson.loads of the same file
runs once in a child of its own (it uses one core). Wall time through the kernels table, best of --repeat.

    python benchmarks/analyzer_cores.py --size 1GB --repeat 3 --out analyzer_cores_<machine>.json
    python benchmarks/analyzer_cores.py --size 2GB --gzip --repeat 2       # the .json.gz too
    python benchmarks/analyzer_cores.py --size 1GB --gzip --members        # the .json.gz as the recorder writes it
    python benchmarks/analyzer_cores.py --size 1GB --repeat 2 --stages     # and where each load's time goes

Prints one line per file kind and core count: seconds, MB/s of JSON, speed-up over one core, orjson.loads's time
over load_run's (above 1: load_run is faster than parsing the JSON alone), peak RSS over the JSON's size; then the
same as a markdown table; with --stages, a table per file kind of each stage's wall time (load_stages.py's timers)
against the core count, where the stage that stops shrinking is the serial part. --out keeps every measurement with
the machine's versions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
from datetime import date
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
import analyzer_throughput  # noqa: E402
import scale_trace  # noqa: E402

CORES = (1, 2, 4, 8, 16)
MB = 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", default=str(HERE.parent / "sample_traces" / "gpt2"), help="trace to scale")
    parser.add_argument("--size", default="1GB", help="JSON size of the scaled trace")
    parser.add_argument("--cores", default=",".join(map(str, CORES)), help="core counts, comma-separated")
    parser.add_argument("--gzip", action="store_true", help="measure the .json.gz too")
    parser.add_argument(
        "--members", action="store_true", help="the .json.gz in indexed members, as the recorder writes it"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per point (best wall time kept)")
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "kernelscope-bench"))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a run is killed")
    parser.add_argument(
        "--stages", action="store_true", help="time each stage of every load (load_stages.py), per core count"
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a DuckDB setting for every load (repeatable), to see what it changes: preserve_insertion_order=false",
    )
    parser.add_argument("--out", help="write every measurement to this JSON file")
    args = parser.parse_args(argv)
    if args.stages:
        os.environ["KS_BENCH_STAGES"] = "1"
    if args.setting:
        os.environ["KS_BENCH_SETTINGS"] = json.dumps(dict(item.split("=", 1) for item in args.setting))

    available = len(os.sched_getaffinity(0))
    counts = [n for n in map(int, args.cores.split(",")) if n <= available]
    left_out = [n for n in map(int, args.cores.split(",")) if n > available]
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    plain = workdir / f"{Path(args.source).name}-{args.size}{'-members' if args.members else ''}.json"
    if not plain.exists() or (args.gzip and not Path(f"{plain}.gz").exists()):
        print(f"writing {plain}{' and .gz' if args.gzip else ''} ...", flush=True)
        size = scale_trace.parse_size(args.size)
        scale_trace.write_scaled(args.source, plain, size=size, gzip_copy=args.gzip, members=args.members)
    json_bytes = plain.stat().st_size
    print(f"{plain}: {json_bytes / MB:,.0f} MB of JSON; {available} cores usable", flush=True)
    if left_out:
        print(f"left out (more than the {available} cores usable): {', '.join(map(str, left_out))}")

    results = []
    for kind in ("json", "json.gz") if args.gzip else ("json",):
        path = plain if kind == "json" else Path(f"{plain}.gz")
        os.environ.pop("KS_BENCH_CORES", None)
        orjson = analyzer_throughput.best_of("orjson", path, args.repeat, args.timeout)
        print(f"{kind} orjson.loads: {_seconds(orjson)}", flush=True)
        for count in counts:
            os.environ["KS_BENCH_CORES"] = str(count)
            measured = analyzer_throughput.best_of("kernelscope", path, args.repeat, args.timeout)
            row = {"kind": kind, "cores": count, "json_bytes": json_bytes, "load_run": measured, "orjson": orjson}
            results.append(row)
            print(_line(row, results), flush=True)
        os.environ.pop("KS_BENCH_CORES", None)
    _table(results)
    if args.stages:
        _stage_table(results)
    if args.out:
        report = {
            "date": date.today().isoformat(),
            "machine": platform.node(),
            "cores_usable": available,
            "versions": analyzer_throughput.versions(),
            "trace": str(plain),
            "settings": args.setting,
            "results": results,
        }
        Path(args.out).write_text(json.dumps(report, indent=1) + "\n")
        print(f"wrote {args.out}")


def _seconds(measured: dict) -> str:
    return measured["error"] if "error" in measured else f"{measured['wall']:.2f} s"


def _figures(row: dict, rows: list[dict]) -> dict | None:
    measured, orjson = row["load_run"], row["orjson"]
    if "error" in measured:
        return None
    one = next((r["load_run"] for r in rows if r["kind"] == row["kind"] and r["cores"] == 1), None)
    return {
        "s": measured["wall"],
        "mb_s": row["json_bytes"] / MB / measured["wall"],
        "speedup": one["wall"] / measured["wall"] if one and "error" not in one else None,
        "orjson_over": orjson["wall"] / measured["wall"] if "error" not in orjson else None,
        "rss": measured["peak_rss"] / row["json_bytes"],
    }


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def _line(row: dict, rows: list[dict]) -> str:
    f = _figures(row, rows)
    if f is None:
        return f"{row['kind']} {row['cores']:>2} cores: {row['load_run']['error']}"
    return (
        f"{row['kind']} {row['cores']:>2} cores: {f['s']:.2f} s, {f['mb_s']:,.0f} MB/s, "
        f"x{_fmt(f['speedup'], '.2f')} over 1 core, orjson/load_run {_fmt(f['orjson_over'], '.2f')}, "
        f"peak RSS {f['rss']:.2f}x the JSON"
    )


def _table(rows: list[dict]) -> None:
    print("\n| file | cores | load_run s | MB/s | speed-up | orjson.loads / load_run | peak RSS / JSON |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        f = _figures(row, rows)
        if f is None:
            print(f"| {row['kind']} | {row['cores']} | {row['load_run']['error']} | | | | |")
            continue
        print(
            f"| {row['kind']} | {row['cores']} | {f['s']:.2f} | {f['mb_s']:,.0f} | {_fmt(f['speedup'], '.2f')} | "
            f"{_fmt(f['orjson_over'], '.2f')} | {f['rss']:.2f} |"
        )


def _stage_table(rows: list[dict]) -> None:
    """Per file kind, each stage's wall seconds (and, for the loading threads, their CPU seconds summed) against the
    core count: a stage that does not shrink as cores are added is the serial part."""
    for kind in dict.fromkeys(row["kind"] for row in rows):
        measured = [row for row in rows if row["kind"] == kind and "stages" in row["load_run"]]
        if not measured:
            continue
        names = list(dict.fromkeys(name for row in measured for name in row["load_run"]["stages"]["wall"]))
        threads = list(dict.fromkeys(name for row in measured for name in row["load_run"]["stages"]["threads"]))
        print(
            f"\nStages of the {kind} load: wall s (CPU s of the process, where one stage runs at a time)"
            " [threads that used CPU]:"
        )
        print("| stage | " + " | ".join(f"{row['cores']} cores" for row in measured) + " |")
        print("| --- |" + " ---: |" * len(measured))
        for name in names:
            cells = []
            for row in measured:
                stages = row["load_run"]["stages"]
                wall, cpu, ran = (stages[key].get(name) for key in ("wall", "cpu", "threads_ran"))
                cells.append(
                    ""
                    if wall is None
                    else f"{wall:.3f}" + ("" if cpu is None else f" ({cpu:.2f})") + ("" if ran is None else f" [{ran}]")
                )
            print(f"| {name} | " + " | ".join(cells) + " |")
        for name in threads:
            cells = []
            for row in measured:
                stages = row["load_run"]["stages"]
                wall, cpu = stages["threads"].get(name), stages["cpu"].get(name)
                cells.append("" if wall is None else f"{wall:.3f} ({cpu:.2f})")
            print(f"| {name}, summed wall (thread CPU) | " + " | ".join(cells) + " |")
        print("| total | " + " | ".join(f"{row['load_run']['wall']:.3f}" for row in measured) + " |")


if __name__ == "__main__":
    main()
