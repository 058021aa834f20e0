"""Hostile inputs and outputs for every command, beside hostile_inputs.py's traces: output paths that are a folder,
a link to nowhere, a FIFO, empty or end with '/'; manifests, sample stores and archive markers in UTF-16, with a
byte order mark, duplicated keys, numbers at the limits, NUL and lone surrogates, fields of the wrong type; run
folders named with quotes, newlines, glob characters, escapes and Latin-1 bytes; gzip members crafted (garbage
between them, a wrong ISIZE or CRC, 1,000 empty ones, 1 GiB of zeros in 1 MiB); a manifest whose device would end a
benchmark script's docstring. Each case runs `kernelscope ...` in a process of its own, in a scratch folder.

    python benchmarks/hostile_inputs_more.py [--only SUBSTRING] [--timeout 120]

Every case must end with exit 0, or exit 2 and one line `kernelscope: error: …`, no traceback; a case that exits 2
must leave the scratch folder as it was (nothing half-written), and no case may write outside it. Prints one line
per case (name, exit status, wall seconds, the last line of stderr), then the count that broke the rule (exit 1 if
any). The bench cases record the demo model on the CPU first (they need torch).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
KERNELSCOPE = str(Path(sys.executable).with_name("kernelscope"))
RUN = REPO / "sample_traces" / "mlp"  # a recorded run: manifest.json, samples.json, trace.json.gz
EMPTY_MEMBER = gzip.compress(b"", mtime=0)
ODD_NAMES = ["it's", 'a"b', "new\nline", "-dash", "*star[1]?", "$(id)", "back\\slash", "pct%s{x}", " lead", "x=1",
             "~", "tab\tt", "esc\x1b]0;x\x07", os.fsdecode(b"lat\xe9")]  # fmt: skip


def _copy(work: Path, name: str = "run") -> Path:
    shutil.copytree(RUN, work / name)
    return work / name


def _edit(name: str, change) -> callable:
    """A case whose run's file ``name`` is ``change(bytes)``, given to analyze."""

    def case(work: Path) -> list[str]:
        run = _copy(work)
        (run / name).write_bytes(change((run / name).read_bytes()))
        return ["analyze", str(run)]

    return case


def _manifest(old: bytes, new: bytes):
    def change(data: bytes) -> bytes:
        assert old in data, old
        return data.replace(old, new, 1)

    return _edit("manifest.json", change)


def _output(command: list[str], make) -> callable:
    """A case writing ``command``'s output to a path ``make(work)`` prepares ({run} and {out} in ``command``)."""

    def case(work: Path) -> list[str]:
        run = _copy(work)
        out = make(work)
        return [arg.format(run=run, out=out) for arg in command]

    return case


def _dangling(work: Path) -> str:
    os.symlink(work.parent / "elsewhere-nonexistent", work / "link")  # outside the scratch folder
    return str(work / "link")


def _fifo(work: Path) -> str:
    os.mkfifo(work / "fifo")
    return str(work / "fifo")


def _folder(work: Path) -> str:
    (work / "folder").mkdir()
    return str(work / "folder")


def _trace(name: str, make) -> callable:
    def case(work: Path) -> list[str]:
        text = gzip.decompress((RUN / "trace.json.gz").read_bytes())
        (work / name).write_bytes(make(text))
        return ["analyze", str(work / name)]

    return case


def _bomb(text: bytes) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    return b"".join(packer.compress(bytes(1 << 20)) for _ in range(1024)) + packer.flush()


def _with_isize(text: bytes, isize: int, crc: int | None = None) -> bytes:
    """One gzip member of ``text`` whose trailer claims ``isize`` bytes (and ``crc``, where given)."""
    member = bytearray(gzip.compress(text, mtime=0))
    member[-4:] = struct.pack("<I", isize)
    if crc is not None:
        member[-8:-4] = struct.pack("<I", crc)
    return bytes(member)


def _two_members(text: bytes, between: bytes) -> bytes:
    return gzip.compress(text[:999]) + between + gzip.compress(text[999:])


def _first_argument(value: bytes) -> callable:
    """A case whose sample store's first sample has ``value`` (JSON text) as its only argument."""
    return _edit("samples.json", lambda d: d.replace(b'"args":{', b'"args": {"tuple": [' + value + b']}, "x": {', 1))


def _odd_name(name: str, command: str):
    def case(work: Path) -> list[str]:
        run = _copy(work, name)
        if command == "archive":
            return ["archive", "--to", str(work / f"A{name}"), "--", str(run)]
        if command == "report":
            return ["report", "-o", str(work / "r.html"), "--", str(run)]
        return [command, "--", str(run)] + (["SELECT count(*) FROM kernels"] if command == "sql" else [])

    return case


def _archive_marker(data: bytes):
    def case(work: Path) -> list[str]:
        (work / "archive").mkdir()
        (work / "archive" / "kernelscope-archive.json").write_bytes(data)
        return ["runs", str(work / "archive")]

    return case


def _injected_device(work: Path) -> list[str]:
    run = work / "cpu_run"
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["device"] = 'cpu"""\nraise SystemExit("injected")\n"""'
    (run / "manifest.json").write_text(json.dumps(manifest))
    return ["bench", str(run), "--device", "cpu", "--top-k", "1", "--repeat", "1", "--warmup", "0", "--scripts",
            str(work / "scripts")]  # fmt: skip


def _docstring_holds_all(work: Path) -> bool:
    """The scripts parse to their docstring and imports: the crafted device stayed inside the docstring."""
    return all(isinstance(ast.parse(s.read_bytes()).body[1], ast.Import) for s in (work / "scripts").glob("*.py"))


def cases() -> dict[str, callable]:
    made = {
        "analyze -o folder": _output(["analyze", "{run}", "-o", "{out}"], _folder),
        "analyze -o folder/": _output(["analyze", "{run}", "-o", "{out}/"], _folder),
        "analyze -o new.csv/": _output(["analyze", "{run}", "-o", "{out}/new.csv/"], str),
        "analyze -o ''": _output(["analyze", "{run}", "-o", ""], str),
        "analyze -o link to nowhere": _output(["analyze", "{run}", "-o", "{out}"], _dangling),
        "analyze -o link to nowhere --force": _output(["analyze", "{run}", "-o", "{out}", "--force"], _dangling),
        "analyze -o fifo --force": _output(["analyze", "{run}", "-o", "{out}", "--format", "csv", "--force"], _fifo),
        "analyze -o its own trace --force": _output(["analyze", "{run}", "-o", "{run}/trace.json.gz", "--force"], str),
        "sql -o folder.duckdb/": _output(["sql", "{run}", "-o", "{out}/x.duckdb/"], str),
        "sql -o fifo.duckdb --force": _output(["sql", "{run}", "-o", "{out}", "--force"], _fifo),
        "sql -o link.duckdb --force": _output(["sql", "{run}", "-o", "{out}", "--force"], _dangling),
        "diff -o folder": _output(["diff", "{run}", "{run}", "-o", "{out}"], _folder),
        "report -o folder": _output(["report", "{run}", "-o", "{out}"], _folder),
        "report -o r.html/": _output(["report", "{run}", "-o", "{out}/r.html/"], str),
        "report -o fifo --force": _output(["report", "{run}", "-o", "{out}", "--force"], _fifo),
        "archive --to a file": _output(["archive", "{run}", "--to", "{run}/manifest.json"], str),
        "archive --to link to nowhere": _output(["archive", "{run}", "--to", "{out}"], _dangling),
        "archive --to fifo": _output(["archive", "{run}", "--to", "{out}"], _fifo),
        "archive --to ''": _output(["archive", "{run}", "--to", ""], str),
        "tree ''": _output(["tree", ""], str),
        "runs of a folder": _output(["runs", "{out}"], _folder),
        "manifest with a UTF-8 BOM": _edit("manifest.json", lambda d: b"\xef\xbb\xbf" + d),
        "manifest in UTF-16": _edit("manifest.json", lambda d: d.decode().encode("utf-16")),
        "manifest in UTF-16-LE, no BOM": _edit("manifest.json", lambda d: d.decode().encode("utf-16-le")),
        "manifest in UTF-32": _edit("manifest.json", lambda d: d.decode().encode("utf-32")),
        "manifest format_version twice": _manifest(b'"format_version": 1', b'"format_version": 1, "format_version": 9'),
        "manifest format_version 1e400": _manifest(b'"format_version": 1', b'"format_version": 1e400'),
        "manifest format_version 2^64+1": _manifest(b'"format_version": 1', b'"format_version": 18446744073709551617'),
        "manifest format_version NaN": _manifest(b'"format_version": 1', b'"format_version": NaN'),
        "manifest format_version \"3\"": _manifest(b'"format_version": 1', b'"format_version": "3"'),
        "manifest raw NUL in a string": _manifest(b'"format_version": 1', b'"format_version": 1, "x": "a\x00b"'),
        "manifest escaped NUL": _manifest(b'"format_version": 1', b'"format_version": 1, "hostname": "a\\u0000b"'),
        "manifest lone surrogate": _manifest(b'"format_version": 1', b'"format_version": 1, "hostname": "\\ud800"'),
        "manifest not UTF-8": _manifest(b'"format_version": 1', b'"format_version": 1, "hostname": "\xff\xfe"'),
        "manifest nested 100,000 deep": _edit("manifest.json", lambda d: b"[" * 100_000 + b"]" * 100_000),
        "manifest null": _edit("manifest.json", lambda d: b"null"),
        "manifest blanks only": _edit("manifest.json", lambda d: b" \n\0"),
        "manifest files.trace '.'": _manifest(b'"trace": "trace.json.gz"', b'"trace": "."'),
        "manifest files.trace samples.json": _manifest(b'"trace": "trace.json.gz"', b'"trace": "samples.json"'),
        "samples.json with a UTF-8 BOM": _edit("samples.json", lambda d: b"\xef\xbb\xbf" + d),
        "samples.json in UTF-16": _edit("samples.json", lambda d: d.decode().encode("utf-16")),
        "samples.json version -1": _edit("samples.json", lambda d: d.replace(b'_version":1', b'_version":-1', 1)),
        "samples.json an int of 5000 digits": _first_argument(b'{"int": "' + b"9" * 5000 + b'"}'),
        "samples.json a float of 1 MB of text": _first_argument(b'{"float": "' + b"x" * (1 << 20) + b'"}'),
        "archive marker with a BOM": _archive_marker(b'\xef\xbb\xbf{"kernelscope_archive": 1}'),
        "archive marker in UTF-16": _archive_marker('{"kernelscope_archive": 1}'.encode("utf-16")),
        "archive marker version 2^64": _archive_marker(b'{"kernelscope_archive": 18446744073709551616}'),
        "archive marker version twice": _archive_marker(b'{"kernelscope_archive": 1, "kernelscope_archive": 99}'),
        "archive marker nested deep": _archive_marker(b"[" * 100_000 + b"]" * 100_000),
        "gzip: garbage between members": _trace("t.json.gz", lambda t: _two_members(t, b"GARBAGE")),
        "gzip: zeros between members": _trace("t.json.gz", lambda t: _two_members(t, bytes(100))),
        "gzip: ISIZE 4 GiB - 1": _trace("t.json.gz", lambda t: _with_isize(t, 0xFFFFFFFF)),
        "gzip: CRC wrong": _trace("t.json.gz", lambda t: _with_isize(t, len(t), crc=0)),
        "gzip: 1,000 empty members first": _trace("t.json.gz", lambda t: EMPTY_MEMBER * 1000 + gzip.compress(t)),
        "gzip: empty members only": _trace("t.json.gz", lambda t: EMPTY_MEMBER * 10),
        "gzip: 1 GiB of zeros in 1 MiB": _trace("t.json.gz", _bomb),
        "gzip: header cut short": _trace("t.json.gz", lambda t: gzip.compress(t)[:5]),
        "gzip: method not deflate": _trace("t.json.gz", lambda t: b"\x1f\x8b\x07" + gzip.compress(t)[3:]),
        "gzip: compressed twice": _trace("t.json.gz", lambda t: gzip.compress(gzip.compress(t))),
        "plain: 1 MiB of zeros": _trace("t.json", lambda t: bytes(1 << 20)),
    }  # fmt: skip
    for name in ODD_NAMES:
        for command in ("analyze", "tree", "sql", "report", "archive"):
            made[f"{command} of a run named {name!r}"] = _odd_name(name, command)
    made["bench --scripts of a manifest whose device ends the docstring"] = _injected_device
    return made


def snapshot(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def run_case(argv: list[str], cwd: Path, timeout: float, **popen) -> tuple[int | str, float, str, bool]:
    """``kernelscope argv`` in ``cwd`` (``popen``: more of subprocess.run's arguments): exit status, wall seconds,
    the last line of stderr, and whether it kept the rule."""
    start = time.perf_counter()
    try:
        done = subprocess.run([KERNELSCOPE, *argv], cwd=cwd, capture_output=True, timeout=timeout, **popen)
    except subprocess.TimeoutExpired:
        return "timeout", time.perf_counter() - start, "", False
    wall = time.perf_counter() - start
    text = done.stderr.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("kernelscope: error: ")]
    code = done.returncode
    right = "Traceback" not in text and (
        (code == 0 and not errors) or (code == 2 and len(errors) == 1 and lines[-1] == errors[0])
    )
    return code, wall, lines[-1] if lines else "", right


def checked_case(argv: list[str], work: Path, timeout: float, **popen) -> tuple[int | str, float, str, bool]:
    """run_case in the case's folder ``work``, and the rule's checks of the files: exit 2 leaves ``work`` as it was,
    and nothing beside the cases' folders in the scratch folder above it changes."""
    outside = work.parent
    before, around = snapshot(work), {p for p in snapshot(outside) if not p.startswith("case-")}
    code, wall, last, right = run_case(argv, work, timeout, **popen)
    after = snapshot(work)
    if code == 2 and after != before:
        right, last = False, f"left behind {sorted(after - before)[:3]} {last}"
    if {p for p in snapshot(outside) if not p.startswith("case-")} != around:
        right, last = False, f"wrote outside its folder {last}"
    return code, wall, last, right


def arguments(description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--only", default="", help="run the cases whose name holds this")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per case")
    return parser.parse_args()


def main() -> int:
    args = arguments("Hostile inputs and outputs for every kernelscope command.")
    with tempfile.TemporaryDirectory() as scratch:
        outside = Path(scratch)
        cpu_run = outside / "cpu_run"
        if "bench" in "".join(name for name in cases() if args.only in name):
            subprocess.run([KERNELSCOPE, "demo", "--device", "cpu", "--out", str(cpu_run)], capture_output=True)
        return run_all(cases(), args.only, args.timeout, outside, prepare=_bench_copy(cpu_run), judge=_bench_scripts)


def _bench_copy(cpu_run: Path):
    def prepare(name: str, work: Path) -> None:
        if name.startswith("bench"):
            shutil.copytree(cpu_run, work / "cpu_run")

    return prepare


def _bench_scripts(name: str, work: Path, code: int | str) -> str | None:
    if name.startswith("bench") and code == 0 and not _docstring_holds_all(work):
        return "a script runs the manifest's text as code"
    return None


def run_all(made: dict, only: str, timeout: float, outside: Path, prepare=None, judge=None) -> int:
    """Each case of ``made`` whose name holds ``only``, in a folder of its own under ``outside`` (a case makes the
    argv, or the argv and more of subprocess.run's arguments): ``prepare(name, work)`` before it, ``judge(name, work,
    code)`` after it (how it broke the rule, or None). Prints a line per case, then the count; 1 if any broke it."""
    broken = total = 0
    for name, make in made.items():
        if only not in name:
            continue
        work = outside / f"case-{total}"
        work.mkdir()
        if prepare is not None:
            prepare(name, work)
        case = make(work)
        argv, popen = case if isinstance(case, tuple) else (case, {})
        code, wall, last, right = checked_case(argv, work, timeout, **popen)
        fault = judge(name, work, code) if judge is not None else None
        if fault is not None:
            right, last = False, f"{fault} {last}"
        broken += not right
        total += 1
        print(f"{name[:60]!r:64} {code!s:>7} {wall:6.2f} s {'ok ' if right else 'BAD'} {last[:160]!r}", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{total} cases, {broken} broke the rule (exit 0, or exit 2 and one line of error and nothing written)")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
