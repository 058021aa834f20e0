"""Every field of a run's manifest.json and samples.json, and of a trace's header (its keys other than traceEvents),
set in turn to each value of the wrong kinds: null, a boolean, 0, -1, 2^63, 2^64 + 1, -2^63 - 1, 1.5, -0.0, 1e308,
"x", "", "\\u0000", [], {}, [1], {"a": 1}, [[[]]] (the first two elements of a list and every key of an object, at
every depth, the whole document included). Each case runs the chosen commands in this process (click's runner)
on a copy of the run, or of the trace.

    python benchmarks/hostile_fields.py [--runs mlp,demo] [--files manifest.json,samples.json]
                                        [--traces plain_kineto/misc.json.gz,...]
                                        [--commands analyze,sql,archive,tree,kernels]

Every case must end with exit 0, or exit 2 and one line `kernelscope: error: …`, no traceback (hostile_inputs.py's
rule). Prints each case that breaks it, then per file the cases run and their exit statuses, and the count that broke
the rule (exit 1 if any).
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import shutil
import sys
import tempfile
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "sample_traces"
VALUES = [None, True, 0, -1, 2**63, 2**64 + 1, -(2**63) - 1, 1.5, -0.0, 1e308, "x", "", "\x00", [], {}, [1],
          {"a": 1}, [[[]]]]  # fmt: skip
COMMANDS = {
    "analyze": lambda target, scratch: ["analyze", target],
    "kernels": lambda target, scratch: ["analyze", target, "--kernels"],
    "tree": lambda target, scratch: ["tree", target],
    "sql": lambda target, scratch: ["sql", target, "SELECT * FROM summary"],
    "archive": lambda target, scratch: ["archive", target, "--to", scratch / "archive"],
}


def paths(doc, prefix=()):
    """Every path into ``doc``: itself, each key of an object, the first two elements of a list, at every depth."""
    yield prefix
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(doc, list):
        for index, value in enumerate(doc[:2]):
            yield from paths(value, (*prefix, index))


def replaced(doc, path, value):
    if not path:
        return value
    doc = copy.deepcopy(doc)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return doc


def run_case(args: list) -> tuple[int, str | None]:
    """The exit status of one command, and what broke the rule (None where it held)."""
    from click.testing import CliRunner
    from kernelscope.cli import main

    done = CliRunner().invoke(main, [str(a) for a in args])
    lines = done.stderr.strip().splitlines()
    if done.exit_code == 0:
        return 0, None
    one_line = len(lines) == 1 and lines[0].startswith("kernelscope: error: ")
    if done.exit_code == 2 and isinstance(done.exception, SystemExit) and one_line:
        return 2, None
    exc = done.exception
    tail = "".join(traceback.format_exception(exc))[-800:] if exc and not isinstance(exc, SystemExit) else ""
    return done.exit_code, f"exit {done.exit_code}: {lines[-3:]} {tail}"


def sweep(label: str, doc, write, commands: list[str], scratch_root: Path) -> tuple[Counter, int]:
    """Each path of ``doc`` set to each value, written by ``write(changed, scratch)`` (which returns the target)."""
    exits, broken = Counter(), 0
    for path in list(paths(doc)):
        for value in VALUES:
            scratch = Path(tempfile.mkdtemp(dir=scratch_root))
            target = write(replaced(doc, path, value), scratch)
            for command in commands:
                code, fault = run_case(COMMANDS[command](target, scratch))
                exits[code] += 1
                if fault is not None:
                    broken += 1
                    print(f"BROKE {label} {command} {list(path)} = {value!r}: {fault}", flush=True)
            shutil.rmtree(scratch)
    return exits, broken


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="mlp,demo", help="run directories of sample_traces/ (comma-separated)")
    parser.add_argument(
        "--traces",
        default="plain_kineto/misc.json.gz,tensor_parallel_nccl1/trace.json.gz",
        help="traces of sample_traces/ whose header",
    )
    parser.add_argument("--files", default="manifest.json,samples.json", help="the files of each run to change")
    parser.add_argument("--commands", default="analyze,sql,archive", help=f"of {', '.join(COMMANDS)}")
    args = parser.parse_args(argv)
    commands = [c for c in args.commands.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        parser.error(f"no command {', '.join(sorted(unknown))}; known: {', '.join(COMMANDS)}")
    total = 0
    with tempfile.TemporaryDirectory(prefix="hostile-fields-") as root:
        root = Path(root)
        for run in filter(None, args.runs.split(",")):
            source = SAMPLES / run
            for name in filter(None, args.files.split(",")):

                def write(doc, scratch, name=name, source=source):
                    shutil.copytree(source, scratch / "run")
                    (scratch / "run" / name).write_text(json.dumps(doc))
                    return scratch / "run"

                doc = json.loads((source / name).read_text())
                exits, broken = sweep(f"{run}/{name}", doc, write, commands, root)
                total += broken
                print(f"{run}/{name}: {sum(exits.values())} cases, exits {dict(sorted(exits.items()))}, {broken} broke")
        for trace in filter(None, args.traces.split(",")):
            whole = json.loads(gzip.decompress((SAMPLES / trace).read_bytes()))
            events = whole.pop("traceEvents")

            def write(header, scratch, events=events):
                doc = {**header, "traceEvents": events} if isinstance(header, dict) else header
                (scratch / "trace.json").write_text(json.dumps(doc))
                return scratch / "trace.json"

            exits, broken = sweep(f"{trace} header", whole, write, commands, root)
            total += broken
            print(f"{trace} header: {sum(exits.values())} cases, exits {dict(sorted(exits.items()))}, {broken} broke")
    print(f"{total} cases broke the rule")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
