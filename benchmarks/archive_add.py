"""The cost of one `archive` add: a sample run added to a fresh archive, and to an archive that already
holds runs, repeated; median and spread of the wall time, and of `runs` (listing) and one `--run` load.

    python benchmarks/archive_add.py [--repeat 7] [--run sample_traces/demo]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from kernelscope.analyzer.archive import Archive

REPO = Path(__file__).resolve().parent.parent


def copies(source: Path, folder: Path, count: int) -> list[Path]:
    """``count`` copies of a run directory with distinct tags, hence distinct run ids."""
    made = []
    for i in range(count):
        target = folder / f"{source.name}-{i}"
        shutil.copytree(source, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["tags"] = {"copy": str(i)}
        (target / "manifest.json").write_text(json.dumps(manifest))
        made.append(target)
    return made


def timed(action) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--run", type=Path, default=REPO / "sample_traces" / "demo")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sources = copies(args.run, tmp / "sources", 2 * args.repeat)
        fresh = [
            timed(lambda s=s, i=i: Archive(tmp / f"fresh-{i}", create=True).add(s))
            for i, s in enumerate(sources[: args.repeat])
        ]
        store = Archive(tmp / "shared", create=True)
        into_one = [timed(lambda s=s: store.add(s)) for s in sources[args.repeat :]]
        listing = [timed(lambda: Archive(tmp / "shared").runs()) for _ in range(args.repeat)]
        ref = sources[-1].name
        one_run = [timed(lambda: Archive(tmp / "shared").run(ref).close()) for _ in range(args.repeat)]
    for name, times in (
        ("add to a new archive", fresh),
        ("add to one archive", into_one),
        ("runs", listing),
        ("run(ID)", one_run),
    ):
        print(
            f"{name:22s} median {statistics.median(times):.3f} s  "
            f"min {min(times):.3f}  max {max(times):.3f}  (n={len(times)})"
        )


if __name__ == "__main__":
    main()
