"""The HTML report's contents beyond the page itself (test_report.py): jobs and ranks, CPU recordings, the trace and
kernels sections, the comparison's header, and the command's refusals."""

import gzip
import json
import os

import pytest
from click.testing import CliRunner
from conftest import REPO
from kernelscope.analyzer import Archive, archive_runs, load_run
from kernelscope.analyzer.report import write_comparison, write_report
from kernelscope.cli import main
from pandas.testing import assert_frame_equal
from test_report import _page_data, _section, _trace

SAMPLES = REPO / "sample_traces"


def test_without_the_report_extra_the_command_says_what_to_install(tmp_path, monkeypatch):
    import sys

    from kernelscope.analyzer.report import render

    monkeypatch.setitem(sys.modules, "plotly.offline", None)  # import plotly.offline now raises ImportError
    render.plotly_js.cache_clear()
    try:
        result = CliRunner().invoke(main, ["report", str(SAMPLES / "mlp"), "-o", str(tmp_path / "r.html")])
    finally:
        render.plotly_js.cache_clear()
    assert result.exit_code == 2
    expected = "kernelscope: error: the report needs jinja2 and plotly: pip install 'kernelscope[report]'\n"
    assert result.output == expected
    assert not (tmp_path / "r.html").exists()


def test_a_job_is_reported_as_one_run_with_its_ranks(tmp_path):
    from conftest import make_job

    job = make_job(tmp_path / "job", {0: SAMPLES / "demo", 1: SAMPLES / "mlp"})
    with load_run(job) as run:
        total = run.sql("SELECT sum(kernel_us) FROM kernels").iloc[0, 0]
        page = write_report(run, tmp_path / "job.html")
    data = _page_data(page)
    assert data["icicle"]["time_us"][data["icicle"]["parent"].index("")] == pytest.approx(total), "both ranks"
    text = page.read_text()
    assert "<dt>ranks</dt><dd>0, 1</dd>" in text
    assert '<th class="num rank">rank</th>' in text, "signatures are per rank"


def test_one_rank_of_a_job_is_reported_as_that_rank_alone(tmp_path):
    from conftest import make_job
    from kernelscope.analyzer.report.views import run_views

    job = make_job(tmp_path / "job", {0: SAMPLES / "demo", 1: SAMPLES / "mlp"})
    with load_run(job) as run, load_run(SAMPLES / "mlp") as alone:
        one, whole = run_views(run, "job", rank=1), run_views(alone, "mlp")
        described = run.describe(None, rank=1)  # analyze --rank 1's numbers
    assert list(one.summary["function_name"]) == list(described["function_name"])
    assert list(one.summary["time_spent_us"]) == pytest.approx(list(described["time_spent_us"]))
    for section in ("top_calls", "summary", "ops", "kernels", "streams", "icicle"):
        assert_frame_equal(getattr(one, section), getattr(whole, section), obj=section)
    assert_frame_equal(one.samples.drop(columns="rank"), whole.samples.drop(columns="rank"), obj="samples")
    assert one.header.totals == whole.header.totals
    assert ("rank", "1 of the job's 0, 1") in one.header.facts


def test_report_takes_the_rank_and_prefix_options_of_tree_and_analyze(tmp_path, monkeypatch):
    from conftest import make_job

    monkeypatch.chdir(tmp_path)
    job = str(make_job(tmp_path / "job", {0: SAMPLES / "demo", 1: SAMPLES / "mlp"}))
    done = CliRunner().invoke(main, ["report", job, "--rank", "1", "-o", "one.html"], catch_exceptions=False)
    assert done.exit_code == 0 and done.output == "report: one.html\n"
    assert "<dt>rank</dt><dd>1 of the job&#39;s 0, 1</dd>" in (tmp_path / "one.html").read_text()
    expected = f"kernelscope: error: Invalid value for --rank: {job} has no rank 7 (its ranks: 0, 1)"
    for command in (["report", job, "-o", "seven.html"], ["analyze", job], ["tree", job], ["bench", job]):
        bad = CliRunner().invoke(main, [*command, "--rank", "7"])
        assert bad.exit_code == 2 and bad.output.startswith(expected + f" (see 'main {command[0]} --help')")
    assert not (tmp_path / "seven.html").exists()
    both = CliRunner().invoke(main, ["report", job, job, "--rank", "1"])
    assert both.exit_code == 2 and "--rank reports one rank of RUN" in both.output
    misc = str(_trace("misc.json.gz"))
    probed = CliRunner().invoke(main, ["report", misc, "--module-prefix", "probe:", "-o", "probe.html"])
    assert probed.exit_code == 0, probed.output
    details = set(_page_data(tmp_path / "probe.html")["icicle"]["detail"])
    with load_run(misc, module_prefix="probe:") as run:
        modules = set(run.sql("SELECT DISTINCT module_name FROM kernels WHERE module_name IS NOT NULL")["module_name"])
    assert modules and modules <= details, "the prefix names the page's modules, as it does tree's"
    empty = CliRunner().invoke(main, ["report", misc, "--function-prefix", ""])
    assert empty.exit_code == 2 and "--function-prefix must not be empty" in empty.output


def test_a_cpu_recordings_header_says_torch_alone_and_no_launches_to_check(demo_run):
    """A CPU recording by a CPU build of torch showed 'torch / CUDA: 2.13.0+cpu / ?' (a CUDA version unknown, it
    read) and 'launch check: ok: 0 launches, each with its device events'."""
    from kernelscope.analyzer.report.views import run_header

    out = demo_run[-1]
    with load_run(out) as run:
        facts = dict(run_header(run, "demo").facts)
    manifest = json.loads((out / "manifest.json").read_text())
    if manifest.get("cuda_version") is None:
        assert facts["torch"] == manifest["torch_version"] and "torch / CUDA" not in facts
    assert facts["launch check"] == "none to check: a CPU recording launches no kernels"
    with load_run(REPO / "sample_traces" / "demo") as run:
        gpu = dict(run_header(run, "demo").facts)
    assert gpu["torch / CUDA"].count(" / ") == 1 and gpu["launch check"].startswith("ok: ")


def test_a_run_folder_whose_name_is_not_utf8_makes_its_page(tmp_path):
    """A folder named in Latin-1 reaches Python with surrogates (b'\\xe9' as '\\udce9'), which UTF-8 cannot write:
    the page shows them escaped instead of the command ending in a traceback."""
    import shutil

    run = tmp_path / os.fsdecode(b"caf\xe9")
    shutil.copytree(SAMPLES / "mlp", run)
    page = tmp_path / "page.html"
    result = CliRunner().invoke(main, ["report", str(run), "-o", str(page)])
    assert result.exit_code == 0, result.output
    assert "caf\\udce9" in page.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["report.pdf", "report.csv", "REPORT.PNG"])
def test_an_output_named_for_another_format_is_refused(name, tmp_path, monkeypatch):
    """`-o report.pdf` wrote the HTML page under a .pdf name, where every other -o is checked against its format."""
    monkeypatch.chdir(tmp_path)
    refused = CliRunner().invoke(main, ["report", str(SAMPLES / "demo"), "-o", name])
    assert refused.exit_code == 2 and f"{name}: names a " in refused.output and "name it .html" in refused.output
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "trace, recorded",
    [
        ("plain_kineto/misc.json.gz", "2026-11-30T00:52:14+00:00"),  # its README: recorded on the H200, 2026-11-30
        ("external/tl_sglang_qwen3_decode.json.gz", "2026-05-28T17:14:24+00:00"),  # its README: 2026-05-28
        ("external/hta_backward_thread.json", "2022-10-19T03:21:55+00:00"),  # epoch ts, no base: 2022-10-19
        ("external/kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz", "2021-01-11T11:59:47+00:00"),
    ],
)
def test_a_bare_traces_recording_time_is_its_base_plus_its_first_event(trace, recorded, tmp_path):
    """The header said when Kineto's base time was (2026-10-01 for a trace of 2026-11-30, 2026-04-01 for one of
    2026-05-28): the events' ts count from it. The archive's runs.start_time is the same time."""
    from kernelscope.analyzer.report.views import run_header

    path = REPO / "sample_traces" / trace
    with load_run(path) as run:
        assert dict(run_header(run, "t").facts)["recorded"] == recorded
    archive_runs([path], tmp_path / "archive")
    with Archive(tmp_path / "archive") as archive:
        [start] = archive.runs()["start_time"]
    assert start.isoformat() == recorded


def test_the_trace_section_names_each_rank_s_trace_and_its_compression_as_it_is(tmp_path):
    """It named rank 0's trace alone for a job of several, and called every trace gzip-compressed, a .json one too."""
    from conftest import make_job

    job = make_job(tmp_path / "job", {0: SAMPLES / "demo", 1: SAMPLES / "mlp"})
    with load_run(job) as run:
        section = _section(write_report(run, tmp_path / "job.html"), "trace")
    for rank in (0, 1):
        assert f"<code>{job / f'rank-{rank}' / 'trace.json.gz'}</code>" in section
    plain = tmp_path / "plain.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "mlp" / "trace.json.gz").read_bytes()))
    with load_run(plain) as run:
        section = _section(write_report(run, tmp_path / "plain.html"), "trace")
    assert f"<code>{plain}</code>" in section and "gzip" not in section


def test_the_kernels_section_says_how_many_kernels_it_leaves_out(tmp_path):
    """A run of more distinct kernels than the table's 30 rows said nothing of the others."""
    doc = json.loads(gzip.decompress((SAMPLES / "demo" / "trace.json.gz").read_bytes()))
    renamed = 0
    for event in doc["traceEvents"]:
        if event.get("cat") == "kernel":
            event["name"] = f"kernel_number_{renamed}"
            renamed += 1
    trace = tmp_path / "distinct.json"
    trace.write_text(json.dumps(doc))
    with load_run(trace) as run:
        distinct = run.sql("SELECT count(DISTINCT kernel) FROM kernels").iloc[0, 0]
        section = _section(write_report(run, tmp_path / "distinct.html"), "kernels")
    assert distinct > 30
    assert f"The 30 costliest of {distinct:,} distinct kernels" in section
    with load_run(SAMPLES / "mlp") as run:
        section = _section(write_report(run, tmp_path / "mlp.html"), "kernels")
    assert "costliest of" not in section


def test_the_comparison_page_says_what_sets_the_two_runs_apart(tmp_path):
    """`diff` and `report A B` warned on stderr that an H200 run and an H100 one may not compare; the page, read
    later or by someone else, did not say it."""
    with load_run(SAMPLES / "demo") as a, load_run(SAMPLES / "external" / "tl_h100_bert_small.json.gz") as b:
        page = write_comparison(a, b, tmp_path / "gpus.html", names=("demo", "bert"))
    header = page.read_text().split("</header>", 1)[0]
    assert "A ran on NVIDIA H200, B on NVIDIA H100 80GB HBM3: their times may not compare" in header
    with load_run(SAMPLES / "resnet50") as a, load_run(SAMPLES / "resnet50_format2") as b:
        page = write_comparison(a, b, tmp_path / "same.html")
    assert "may not compare" not in page.read_text()


def test_a_trace_without_scopes_is_not_said_to_hold_them(tmp_path):
    """A plain trace's page said its ks.module:… and ks.fn:… scopes were the modules and calls of the report: it has
    none, its calls are named from the trace (aten::cudnn_convolution_backward…)."""
    trace = SAMPLES / "external" / "kineto_resnet50_autograd_api_2021-02.pt.trace.json.gz"
    with load_run(trace) as run:
        section = _section(write_report(run, tmp_path / "plain.html"), "trace")
    assert "scopes named" not in section and "correlation" in section


def test_a_signatures_time_per_call_groups_its_thousands_as_its_time_in_all(tmp_path):
    """A CPU recording's signature read "27858.29" µs per call beside "27,858.3" µs in all (a kernel's mean alike):
    a mean now groups its thousands too, keeping its two decimals."""
    import re

    from kernelscope.analyzer.report import render

    assert render._us_mean(27858.2912) == "27,858.29" and render._us_mean(2.3456) == "2.35"
    with load_run(REPO / "sample_traces" / "demo") as run:
        page = write_report(run, tmp_path / "demo.html").read_text()
    assert re.search(r'<td class="num">\d\.\d\d</td><td class="num">\d+\.\d</td>', page), "per call, then in all"
