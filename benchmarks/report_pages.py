"""The HTML report in headless Chromium: how big a page is, how long it takes to write and to open (until its
charts are drawn), for the sample BERT run, a comparison, a recorded run of 100 distinct calls and one of 11,201
icicle boxes (800 chains of 11 modules, each a call and its operator; on a quiet CPU); and the screenshots of docs/
(docs/report.png, docs/report-compare.png), taken by the same Chromium.

    python benchmarks/report_pages.py [--screenshots] [--repeat 5]
    python benchmarks/report_pages.py --open A.html B.html A2.html [--repeat 5]

``--open`` instead opens pages already written (by two trees: the same run's page of each) in turn, round after
round, so that the machine's noise falls on each alike: an A/B/A2 of what the page costs to draw.

Needs chromium on PATH, the report extra, and torch (CPU is enough) for the recorded runs."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from browser import Browser  # noqa: E402
from kernelscope.analyzer import load_run  # noqa: E402
from kernelscope.analyzer.report import write_comparison, write_report  # noqa: E402
from kernelscope.analyzer.report.views import run_views  # noqa: E402

SAMPLES = REPO / "sample_traces"
UNARY = """abs absolute acos acosh adjoint all amax amin aminmax angle any arccos arccosh arcsin arcsinh arctan
arctanh argmax argmin argsort argwhere asin asinh atan atanh atleast_1d atleast_2d atleast_3d ceil celu clone conj
conj_physical corrcoef cos cosh count_nonzero cov cumulative_trapezoid deg2rad det detach detach_copy diag diag_embed
diagflat diagonal diagonal_copy diff digamma erf erfc erfinv exp exp2 expm1 fix flatten fliplr flipud floor frac
frexp gradient hardshrink i0 inverse isfinite isinf isnan isneginf isposinf isreal lgamma log log10 log1p log2 logdet
logical_not logit lu matrix_exp max mean median min mode msort nan_to_num nanmean nanmedian nansum neg negative
nonzero norm nuclear_norm pdist pinverse positive prod qr rad2deg ravel real reciprocal relu resolve_conj rot90
round rsqrt selu sgn sigmoid sign signbit sin sinc sinh slogdet sort sqrt square squeeze std std_mean sum svd t tan
tanh trace trapezoid tril triu trunc unbind unique unique_consecutive var var_mean""".split()


def hundred_call_run(out: Path) -> Path:
    """Record (on the CPU) a module whose forward makes over 100 distinct torch calls, each in a submodule."""
    import torch
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    sample = torch.rand(64, 64) + 0.1

    def works(name: str) -> bool:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                getattr(torch, name)(sample)
            return True
        except Exception:  # noqa: BLE001 (a function this torch lacks or that wants more arguments)
            return False

    names = [name for name in UNARY if hasattr(torch, name) and works(name)][:110]  # some launch nothing

    class Call(torch.nn.Module):
        def __init__(self, name: str):
            super().__init__()
            self.function = getattr(torch, name)

        def forward(self, x):
            return self.function(x)

    model = torch.nn.Sequential(*(Call(name) for name in names))
    model.forward = lambda x: [call(x) for call in model]  # every call sees the input, not its neighbour's output
    ModuleFunctionKernelProfiler().profile(model, [((sample,), {})], warmup_iterations=1, out=out)
    return out


def many_box_run(out: Path, chains: int = 800, depth: int = 10) -> Path:
    """Record (on the CPU) a module of ``chains`` submodules, each ``depth`` wrappers around one torch.mm: about
    ``chains * (depth + 4)`` icicle boxes, each over the report's folding threshold, unless a busy machine made
    some torch.mm take far longer than the others (the boxes printed are those of the run)."""
    import torch
    from kernelscope.recorder import ModuleFunctionKernelProfiler

    class Leaf(torch.nn.Module):
        def forward(self, x):
            return torch.mm(x, x)

    class Wrap(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)

    def chain() -> torch.nn.Module:
        module = Leaf()
        for _ in range(depth):
            module = Wrap(module)
        return module

    model = torch.nn.Sequential(*(chain() for _ in range(chains)))
    model.forward = lambda x: [link(x) for link in model]  # every chain sees the input
    ModuleFunctionKernelProfiler().profile(model, [((torch.rand(128, 128),), {})], warmup_iterations=1, out=out)
    return out


def chromium_cpu_s(browser: Browser) -> float:
    """CPU seconds (user + system) used so far by the browser's processes, which a busy machine does not inflate
    as it does the wall-clock time."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for proc in Path("/proc").iterdir():
        try:
            if browser.profile.encode() not in (proc / "cmdline").read_bytes():
                continue
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


def measure(browser: Browser, page: Path, repeat: int) -> dict:
    opens, cpu = [], []
    for _ in range(repeat):
        before = chromium_cpu_s(browser)
        opens.append(browser.open(page))
        cpu.append(chromium_cpu_s(browser) - before)
        assert browser.console_errors() == [], browser.console_errors()
    return {"MB": page.stat().st_size / 2**20, "open_s": statistics.median(opens), "cpu_s": statistics.median(cpu)}


def open_in_turn(pages: list[Path], repeat: int) -> None:
    """Each page opened once a round, ``repeat`` rounds, after one untimed round; the medians per page."""
    opens: dict[Path, list] = {page: [] for page in pages}
    with Browser(timeout=300) as browser:
        for round_ in range(repeat + 1):
            for page in pages:
                before, opened = chromium_cpu_s(browser), browser.open(page)
                if round_:
                    opens[page].append((opened, chromium_cpu_s(browser) - before))
                assert browser.console_errors() == [], browser.console_errors()
    for page, times in opens.items():
        wall, cpu = statistics.median(t for t, _ in times), statistics.median(c for _, c in times)
        print(f"{page}: open (median of {repeat}) {wall:.2f} s wall, {cpu:.2f} s of Chromium's CPU")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--screenshots", action="store_true", help="write docs/report.png and docs/report-compare.png")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--open", nargs="+", type=Path, metavar="PAGE", help="open these pages in turn, and only them")
    args = parser.parse_args()
    if args.open:
        open_in_turn(args.open, args.repeat)
        return
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pages, written = {}, {}
        with load_run(SAMPLES / "bert") as run:
            start = time.perf_counter()
            pages["bert"] = write_report(run, tmp / "bert.html", name="sample_traces/bert")
            written["bert"] = time.perf_counter() - start
        with load_run(SAMPLES / "resnet50") as a, load_run(SAMPLES / "resnet50_format2") as b:
            start = time.perf_counter()
            pages["compare"] = write_comparison(
                a, b, tmp / "compare.html", names=("sample_traces/resnet50", "sample_traces/resnet50_format2")
            )
            written["compare"] = time.perf_counter() - start
        try:
            with load_run(hundred_call_run(tmp / "hundred")) as run:
                calls = len(run.sql("SELECT * FROM summary"))
                start = time.perf_counter()
                pages[f"{calls} calls"] = write_report(run, tmp / "hundred.html", name="100 calls")
                written[f"{calls} calls"] = time.perf_counter() - start
            with load_run(many_box_run(tmp / "boxes")) as run:
                boxes = len(run_views(run, "many boxes").icicle)
                start = time.perf_counter()
                pages[f"{boxes} boxes"] = write_report(run, tmp / "boxes.html", name="many boxes")
                written[f"{boxes} boxes"] = time.perf_counter() - start
        except ImportError as exc:
            print(f"skipped the recorded runs: {exc}", file=sys.stderr)
        with Browser(timeout=120) as browser:
            browser.open(pages["bert"])  # a first open warms the browser's caches
            for key, page in pages.items():
                result = measure(browser, page, args.repeat)
                print(
                    f"{key:>12}: {result['MB']:.2f} MB, written in {written[key]:.2f} s, open (median of "
                    f"{args.repeat}) {result['open_s']:.2f} s wall, {result['cpu_s']:.2f} s of Chromium's CPU"
                )
            if args.screenshots:
                browser.open(pages["bert"])
                browser.screenshot(REPO / "docs" / "report.png", width=1400, height=1500)
                browser.open(pages["compare"])
                browser.screenshot(REPO / "docs" / "report-compare.png", width=1400, height=1300)
                print("wrote docs/report.png, docs/report-compare.png")


if __name__ == "__main__":
    main()
