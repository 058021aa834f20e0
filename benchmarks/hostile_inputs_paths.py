"""Hostile paths for every command, beside hostile_inputs_more.py's: inputs that are a FIFO, /dev/zero, /dev/stdin
(a pipe no one writes, or /dev/null), an empty folder, a socket, a link that loops, a DuckDB database or a Parquet
file; run directories whose trace is a link to /dev/zero, to a loop or to a file outside them; a trace of valid
JSON whose args nest 10^7 arrays deep; `-o` a link to a file outside the scratch folder, with --force; and every
output written under RLIMIT_FSIZE (the write fails with EFBIG, as on a full disk). Each case runs `kernelscope ...`
in a process of its own, in a scratch folder.

    python benchmarks/hostile_inputs_paths.py [--only SUBSTRING] [--timeout 120]

The rule is hostile_inputs_more.py's (exit 0, or 2 and one line `kernelscope: error: …`, no traceback; exit 2
leaves the scratch folder as it was; nothing written outside it), and a file outside the scratch folder that a
link points at keeps its bytes. Prints one line per case, then the count that broke the rule (exit 1 if any).
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_inputs_more import KERNELSCOPE, RUN, _copy, _fifo, _folder, arguments, run_all  # noqa: E402

FSIZE_LIMIT = 16 << 10  # bytes: below each output's size for resnet50's run
BIG_RUN = RUN.parent / "resnet50"
PRECIOUS = b"a file outside the scratch folder that no command may change\n"


def _socket(work: Path) -> str:
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(work / "sock"))  # left bound: the file stays a socket after the process closes it
    server.close()
    return str(work / "sock")


def _loop(work: Path) -> str:
    os.symlink(work / "loop-b", work / "loop-a")
    os.symlink(work / "loop-a", work / "loop-b")
    return str(work / "loop-a")


def _duckdb(work: Path) -> str:
    import duckdb

    con = duckdb.connect(str(work / "trace.json"))
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    con.close()
    return str(work / "trace.json")


def _parquet(work: Path) -> str:
    import duckdb

    duckdb.sql(f"COPY (SELECT 1 AS x) TO '{work / 'trace.json.gz'}' (FORMAT parquet)")
    return str(work / "trace.json.gz")


def _nested(work: Path) -> str:
    """A trace whose one kernel's args nest 10^7 arrays: valid JSON that a recursive parser cannot read."""
    text = gzip.decompress((RUN / "trace.json.gz").read_bytes())
    depth = 10_000_000
    event = b'{"ph": "i", "name": "deep", "pid": 1, "tid": 1, "ts": 1, "args": {"a": ' + b"[" * depth
    event += b"]" * depth + b"}},"
    (work / "deep.json").write_bytes(text.replace(b'"traceEvents": [', b'"traceEvents": [' + event, 1))
    return str(work / "deep.json")


def _bomb(head: bytes, fill: bytes, tail: bytes = b"") -> callable:
    """A gzip trace of ``head``, 1 GiB of ``fill`` repeated, and ``tail``, in about 1 MiB (``fill`` of one byte)."""

    def make(work: Path) -> str:
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        block = fill * ((1 << 20) // len(fill))
        pieces = [packer.compress(head)] + [packer.compress(block) for _ in range(1024)]
        (work / "bomb.json.gz").write_bytes(b"".join(pieces) + packer.compress(tail) + packer.flush())
        return str(work / "bomb.json.gz")

    return make


def _beside(make, layout: str) -> callable:
    """``make``'s trace as one rank of a job (``layout`` "job") or one trace of a folder of traces ("folder")."""

    def made(work: Path) -> str:
        bomb = Path(make(work))
        if layout == "job":
            for rank in (0, 1):
                folder = work / "job" / f"rank-{rank}"
                shutil.copytree(RUN, folder)
                manifest = json.loads((folder / "manifest.json").read_text())
                manifest.update(rank=rank, world_size=2, backend="nccl")
                (folder / "manifest.json").write_text(json.dumps(manifest))
            bomb.replace(work / "job" / "rank-1" / "trace.json.gz")
            return str(work / "job")
        (work / "traces").mkdir()
        shutil.copy(RUN / "trace.json.gz", work / "traces" / "a.json.gz")
        bomb.rename(work / "traces" / "b.json.gz")
        return str(work / "traces")

    return made


def _run_with_trace(target) -> callable:
    """A copy of the run whose trace.json.gz is a link to ``target(work)``."""

    def make(work: Path) -> str:
        run = _copy(work)
        (run / "trace.json.gz").unlink()
        os.symlink(target(work), run / "trace.json.gz")
        return str(run)

    return make


def _outside_trace(work: Path) -> str:
    return str(work.parent / "outside.json.gz")


def _input(command: str, make) -> callable:
    def case(work: Path) -> tuple[list[str], dict]:
        path = make(work)
        if command == "sql":
            return ["sql", path, "SELECT count(*) FROM kernels"], {}
        if command == "archive":
            return ["archive", path, "--to", str(work / "A")], {}
        if command == "report":
            return ["report", path, "-o", str(work / "r.html")], {}
        if command == "diff":
            return ["diff", str(RUN), path], {}
        return [command, path], {}

    return case


def _stdin(command: str, null: bool) -> callable:
    def case(work: Path) -> tuple[list[str], dict]:
        argv, _ = _input(command, lambda _: "/dev/stdin")(work)
        return argv, {"stdin": subprocess.DEVNULL if null else subprocess.PIPE}

    return case


def _precious_link(command: list[str]) -> callable:
    """``command`` writing through ``{out}``, a link to a file outside the scratch folder, with --force."""

    def case(work: Path) -> tuple[list[str], dict]:
        os.symlink(work.parent / "precious", work / "link")
        return [arg.format(run=RUN, out=work / "link") for arg in command], {}

    return case


def _limited(command: list[str], archived: bool = False) -> callable:
    """``command`` (``{run}``, ``{out}``) under RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk;
    ``archived``: ``{out}`` an archive of one run already, made without the limit."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

    def case(work: Path) -> tuple[list[str], dict]:
        run = work / "run"
        shutil.copytree(BIG_RUN, run)
        if archived:
            first = [KERNELSCOPE, "archive", str(RUN), "--to", str(work / "out")]
            subprocess.run(first, check=True, capture_output=True)
        return [arg.format(run=run, out=work / "out") for arg in command], {"preexec_fn": limit}

    return case


INPUTS = {
    "a FIFO": _fifo,
    "/dev/zero": lambda work: "/dev/zero",
    "an empty folder": _folder,
    "a socket": _socket,
    "a link that loops": _loop,
    "a DuckDB database named trace.json": _duckdb,
    "a Parquet file named trace.json.gz": _parquet,
    "a run whose trace links to /dev/zero": _run_with_trace(lambda work: "/dev/zero"),
    "a run whose trace links to a loop": _run_with_trace(_loop),
    "a run whose trace links outside it": _run_with_trace(_outside_trace),
    "a gzip bomb of 1 GiB of '['": _bomb(b"", b"["),
    "a gzip bomb of 1 GiB of blanks inside traceEvents": _bomb(b'{"traceEvents": [', b" ", b"]}"),
    "a gzip bomb of a 1 GiB name": _bomb(b'{"traceEvents": [{"ph": "i", "name": "', b"a", b'"}]}'),
    "a gzip bomb of 1 GiB of events": _bomb(b'{"traceEvents": [', b'{"ph":"i","ts":1,"pid":1,"tid":1},', b"{}]}"),
    "a job whose rank 1 is a gzip bomb": _beside(_bomb(b"", b"["), "job"),
    "a folder of traces, one a gzip bomb": _beside(_bomb(b"", b"["), "folder"),
}
LIMITED = {
    "analyze -o csv": ["analyze", "{run}", "--kernels", "-o", "{out}.csv"],
    "analyze -o json": ["analyze", "{run}", "--kernels", "-o", "{out}.json"],
    "analyze -o parquet": ["analyze", "{run}", "--kernels", "-o", "{out}.parquet"],
    "sql -o duckdb": ["sql", "{run}", "-o", "{out}.duckdb"],
    "report -o html": ["report", "{run}", "-o", "{out}.html"],
    "diff -o csv": ["diff", "{run}", "{run}", "-o", "{out}.csv"],
    "archive --to": ["archive", "{run}", "--to", "{out}"],
}
LINKED = {
    "analyze": ["analyze", "{run}", "-o", "{out}", "--format", "csv", "--force"],
    "sql": ["sql", "{run}", "-o", "{out}", "--force"],
    "report": ["report", "{run}", "-o", "{out}", "--force"],
    "diff": ["diff", "{run}", "{run}", "-o", "{out}", "--format", "csv", "--force"],
}


def cases() -> dict[str, callable]:
    made = {}
    for name, make in INPUTS.items():
        for command in ("analyze", "tree", "sql", "report", "archive", "diff"):
            made[f"{command} of {name}"] = _input(command, make)
    for name in ("a FIFO", "/dev/zero", "a socket", "a link that loops"):
        made[f"runs of {name}"] = _input("runs", INPUTS[name])
    for command in ("analyze", "archive"):
        made[f"{command} of /dev/stdin, a pipe"] = _stdin(command, null=False)
        made[f"{command} of /dev/stdin, /dev/null"] = _stdin(command, null=True)
    made["analyze of a trace whose args nest 10^7 arrays"] = _input("analyze", _nested)
    for name, command in LINKED.items():
        made[f"{name} -o a link to a file outside --force"] = _precious_link(command)
    for name, command in LIMITED.items():
        made[f"{name} under RLIMIT_FSIZE {FSIZE_LIMIT}"] = _limited(command)
    made[f"archive --to an archive of a run under RLIMIT_FSIZE {FSIZE_LIMIT}"] = _limited(LIMITED["archive --to"], True)
    return made


def main() -> int:
    args = arguments("Hostile input and output paths for every kernelscope command.")
    with tempfile.TemporaryDirectory() as scratch:
        outside = Path(scratch)
        shutil.copy(RUN / "trace.json.gz", outside / "outside.json.gz")

        def prepare(name: str, work: Path) -> None:
            (outside / "precious").write_bytes(PRECIOUS)

        def judge(name: str, work: Path, code: int | str) -> str | None:
            changed = (outside / "precious").read_bytes() != PRECIOUS
            return "changed a file outside through a link" if changed else None

        return run_all(cases(), args.only, args.timeout, outside, prepare=prepare, judge=judge)


if __name__ == "__main__":
    sys.exit(main())
