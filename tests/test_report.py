"""The HTML report (analyzer/report, `kernelscope report`): a self-contained page laid out from the views, checked
in the file and in a real headless Chromium (tests/browser.py): the charts are drawn with the run's names, the
console stays clean, and nothing is fetched from anywhere."""

import gzip
import json
import os
import re
from html.parser import HTMLParser

import pytest
from browser import Browser, find_chromium
from click.testing import CliRunner
from conftest import REPO, SHARED_TRACES
from kernelscope.analyzer import archive_runs, load_run
from kernelscope.analyzer.report import write_comparison, write_report
from kernelscope.analyzer.report.progress import steps
from kernelscope.analyzer.report.render import inline_script
from kernelscope.cli import main

SAMPLES = REPO / "sample_traces"
PAGE_LIMIT_BYTES = 15 * 2**20
HOSTILE = "</script><script>window.injected = 1</script><b>x & y</b>"


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """The pages of the sample BERT run, of a plain trace that names no call, of a trace with hostile names, and of
    a comparison."""
    out = tmp_path_factory.mktemp("report")
    hostile = _hostile_trace(out / "hostile.json")
    plain = _trace_without_operators(out / "plain.json")
    written = {}
    for key, source in (("bert", SAMPLES / "bert"), ("plain", plain), ("hostile", hostile)):
        with load_run(source, module_prefix="probe:" if key != "bert" else None) as run:
            written[key] = write_report(run, out / f"{key}.html", name=key)
    with load_run(SAMPLES / "resnet50") as a, load_run(SAMPLES / "resnet50_format2") as b:
        written["compare"] = write_comparison(a, b, out / "compare.html", names=("resnet50", "resnet50_format2"))
    return written


def _trace(name):
    return next(p for p in SHARED_TRACES if p.name == name)


def _trace_without_operators(path):
    """misc.json.gz less its operators: no launch is held by a call, so the trace names none."""
    trace = json.loads(gzip.decompress(_trace("misc.json.gz").read_bytes()))
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("cat") != "cpu_op"]
    path.write_text(json.dumps(trace))
    return path


def _hostile_trace(path):
    """misc.json.gz with a kernel whose name would end the page's script and inject markup, were it not escaped."""
    trace = json.loads(gzip.decompress(_trace("misc.json.gz").read_bytes()))
    kernel = next(e for e in trace["traceEvents"] if e.get("cat") == "kernel")
    kernel["name"] = HOSTILE
    path.write_text(json.dumps(trace))
    return path


class Resources(HTMLParser):
    """Every script, stylesheet, image, frame or link reference and inline-script count of a page."""

    def __init__(self):
        super().__init__()
        self.references, self.scripts = [], 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.scripts += tag == "script"
        for key in ("src", "href", "data", "srcset"):
            if attrs.get(key) and not attrs[key].startswith("#"):
                self.references.append((tag, attrs[key]))


def test_a_page_is_one_file_with_everything_inlined(pages):
    for key, path in pages.items():
        text = path.read_text(encoding="utf-8")
        parser = Resources()
        parser.feed(text)
        assert parser.references == [], f"{key}: the page refers to other files or hosts"
        assert parser.scripts == 2, "plotly.js and the page's own script, both inline"
        assert not re.search(r"url\(\s*['\"]?(https?:|//)", text), "no stylesheet fetches anything"
        assert path.stat().st_size < PAGE_LIMIT_BYTES
        assert oct(path.stat().st_mode & 0o777) != oct(0o600), "readable as any file the user writes"


def test_the_page_shows_the_views_numbers(pages):
    with load_run(SAMPLES / "bert") as run:
        total = run.sql("SELECT sum(kernel_us) FROM kernels").iloc[0, 0]
        functions = list(run.sql("SELECT function_name FROM summary")["function_name"])
        modules = set(run.tree()["module"])
    data = _page_data(pages["bert"])
    root = data["icicle"]["parent"].index("")
    assert data["icicle"]["time_us"][root] == pytest.approx(total), "the icicle's root is the whole run"
    assert sum(data["icicle"]["value_us"]) == pytest.approx(total), "its leaves hold every row once"
    details = set(data["icicle"]["detail"])
    assert {m for m in modules if m} <= details | {None}, "every module of the tree is a node of the icicle"
    assert data["calls"]["function_name"] == functions[:20]
    text = pages["bert"].read_text()
    assert all(f'<td class="name">{name}</td>' in text for name in functions), "every call in the describe table"


def _page_data(path):
    text = path.read_text(encoding="utf-8")
    return json.loads(re.search(r"const KS = (.*?);\n", text).group(1))


def test_names_are_escaped_in_the_markup_and_the_data(pages):
    text = pages["hostile"].read_text(encoding="utf-8")
    assert HOSTILE not in text and "&lt;/script&gt;" in text, "escaped in the tables"
    assert "\\u003c/script\\u003e" in text, "escaped in the data (tojson)"
    assert inline_script('x = "</SCRIPT>"; y = "<!--"') == 'x = "<\\/SCRIPT>"; y = "<\\!--"'


def test_a_trace_without_calls_shows_its_operators(pages):
    text = pages["plain"].read_text()
    assert "The costliest operators" in text and "Every call" not in text
    assert _page_data(pages["plain"])["calls"] is None


def test_the_comparison_lists_regressions_first(pages):
    with load_run(SAMPLES / "resnet50") as a, load_run(SAMPLES / "resnet50_format2") as b:
        from kernelscope.analyzer import diff

        frame = diff(a, b)
    text = pages["compare"].read_text()
    functions = frame[frame["level"] == "function"]
    shown = re.findall(r'<tr class="(worse|better|same)">\s*<td class="name">([^<]*)</td>', text)
    names = [name for _, name in shown if name in set(functions["name"].dropna())]
    expected = functions.dropna(subset=["name"]).sort_values("delta_us", ascending=False)["name"]
    assert names == list(expected), "functions from the largest growth to the largest drop"
    kinds = dict((name, change) for change, name in shown)
    for row in functions.dropna(subset=["name"]).itertuples():
        assert kinds[row.name] == ("worse" if row.delta_us > 0 else "better" if row.delta_us < 0 else "same")


def test_progress_names_each_step_once_the_work_takes_long(capsys):
    import io
    import time

    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    with steps(True, console=console, show_after_s=0.0) as step:
        step("reading the module tree")
        time.sleep(0.3)
    assert "report: reading the module tree" in out.getvalue()
    quiet = io.StringIO()
    with steps(True, console=Console(file=quiet, force_terminal=True), show_after_s=5.0) as step:
        step("quick")
    assert quiet.getvalue().strip() == "", "a quick report prints nothing"


def test_the_command_writes_refuses_to_replace_and_reads_archives(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    demo = str(SAMPLES / "demo")
    result = CliRunner().invoke(main, ["report", demo], catch_exceptions=False)
    assert result.exit_code == 0 and result.output == "report: demo-report.html\n"
    again = CliRunner().invoke(main, ["report", demo])
    assert again.exit_code == 2 and "already exists" in again.output
    [(run_id, _)] = archive_runs([SAMPLES / "demo"], tmp_path / "archive")
    archived = CliRunner().invoke(main, ["report", str(tmp_path / "archive"), "--run", run_id, "-o", "a.html"])
    assert archived.exit_code == 0, archived.output
    assert "keeps its tables, not its trace file" in (tmp_path / "a.html").read_text()
    both = CliRunner().invoke(main, ["report", demo, str(SAMPLES / "mlp"), "--force", "-o", "c.html"])
    assert both.exit_code == 0 and "mlp</span> (B) against" in (tmp_path / "c.html").read_text()
    missing = CliRunner().invoke(main, ["report", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no such run directory or trace file" in missing.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.html", "archive", "c.html", "demo-report.html"]


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        if os.environ.get("KERNELSCOPE_REQUIRE_CHROMIUM"):
            pytest.fail("KERNELSCOPE_REQUIRE_CHROMIUM is set (.ci/run) but no chromium is on PATH")
        pytest.skip("no Chromium on PATH (apt-get install chromium; .ci/run installs it)")
    with Browser(executable, timeout=120) as opened:
        yield opened


CHART_TEXT = "Array.from(document.querySelectorAll('#{} svg text')).map(t => t.textContent)"
SLICE_LABELS = (  # the first line of each drawn box of the icicle: its name (the second is its share)
    "Array.from(document.querySelectorAll('#icicle g.slice text'))"
    ".map(t => (t.querySelector('tspan') || t).textContent)"
)


def test_the_report_draws_in_chromium_and_zooms_on_a_click(browser, pages):
    browser.open(pages["bert"])
    assert browser.console_errors() == []
    assert browser.requested_urls() == [pages["bert"].resolve().as_uri()], "nothing fetched but the page itself"
    assert {"whole run", "encoder", "layer", "embeddings", "attention"} <= set(browser.evaluate(SLICE_LABELS))
    bars = browser.evaluate(CHART_TEXT.format("top-calls"))
    assert {"linear", "layer_norm", "scaled_dot_product_attention", "gelu"} <= set(bars)
    before = browser.evaluate("document.querySelectorAll('#icicle g.slice').length")
    assert before > 100
    clicked = browser.evaluate(
        """(() => {
        const slice = Array.from(document.querySelectorAll('#icicle g.slice'))
            .find(s => (s.querySelector('text tspan') || {}).textContent === 'embeddings');
        if (!slice) return false;
        slice.dispatchEvent(new MouseEvent('click', {bubbles: true}));
        return true; })()"""
    )
    assert clicked, "the embeddings node is drawn"
    browser.evaluate("new Promise(done => setTimeout(done, 1500))")  # plotly animates the zoom
    after = set(browser.evaluate(SLICE_LABELS))
    assert {"embeddings", "word_embeddings", "LayerNorm"} <= after and "encoder" not in after, "its subtree fills it"
    assert browser.evaluate("document.querySelectorAll('#icicle g.slice').length") < before
    assert browser.console_errors() == []


def test_the_icicle_finds_each_box_s_parent_without_walking_the_tree(browser, pages):
    """plotly.js labels each drawn box after a search of the whole tree for its parent (quadratic: 9 s for a page of
    11,000 boxes); the inlined plotly.js looks parents up by id, walking the tree once per drawing."""
    browser.open(pages["bert"])
    walks = browser.evaluate(
        """(async () => {
        const gd = document.getElementById('icicle');
        const node = Object.getPrototypeOf(gd.calcdata[0][0].hierarchy);
        const [after, each] = [node.eachAfter, node.each];
        let walks = 0;
        node.eachAfter = function (...a) { walks++; return after.apply(this, a); };
        node.each = function (...a) { walks++; return each.apply(this, a); };
        try { await Plotly.relayout(gd, {height: 621}); } finally { node.eachAfter = after; node.each = each; }
        return walks; })()"""
    )
    slices = browser.evaluate("document.querySelectorAll('#icicle g.slice').length")
    assert slices > 100 and walks <= 5, f"{walks} walks of the tree to draw {slices} boxes"
    assert {"whole run", "encoder", "embeddings"} <= set(browser.evaluate(SLICE_LABELS))
    assert browser.console_errors() == []


SHOWN_BOXES = """((id) => Object.fromEntries(Array.from(document.querySelectorAll(`#${id} g.slice`)).flatMap((s) => {
    const box = s.querySelector('path').getBBox(), text = s.querySelector('text');
    const round = (v) => (v || '').replace(/\\d+\\.\\d+(e-?\\d+)?/g, (n) => Number(n).toFixed(2));
    return box.width > 0 && box.height > 0
        ? [[s.__data__.data.data.id, [round(s.querySelector('path').getAttribute('d')), text && text.textContent,
            text && round(text.getAttribute('transform')), getComputedStyle(s.querySelector('path')).opacity]]]
        : []; })))"""

ALL_NODES = """(async (level) => {  // the page's icicle drawn again from every node of the views' rows
    const gd = document.getElementById('icicle'), t = gd.data[0], d = KS.icicle;
    const at = new Map(t.ids.map((id, i) => [id, i]));
    const given = (list, missing) => d.id.map((id) => (at.has(id) ? list[at.get(id)] : missing));
    const div = document.createElement('div');
    div.id = 'all-nodes';
    div.style.width = gd.offsetWidth + 'px';
    gd.after(div);
    await Plotly.newPlot(div, [Object.assign({}, t, {
        ids: d.id, parents: d.parent, values: d.value_us, level: level, labels: given(t.labels, ''),
        customdata: given(t.customdata, ['', 0, 0, 0, 'more']),
        marker: Object.assign({}, t.marker, {colors: given(t.marker.colors, '#000')})})],
        gd.layout, {staticPlot: true});
    return d.id.length; })"""


def test_the_icicle_gets_the_nodes_in_view_and_draws_them_as_from_every_node(browser, pages):
    """plotly draws every node it is given, each below the levels in view shrunk to nothing but as costly to draw:
    the page gives it the nodes in view, one level more and the path above, and draws what every node would."""
    data = _page_data(pages["bert"])["icicle"]
    depth = {"": -1}
    for _ in range(len(data["id"])):
        depth.update({i: depth[p] + 1 for i, p in zip(data["id"], data["parent"], strict=True) if p in depth})
    browser.open(pages["bert"])
    given = browser.evaluate("document.getElementById('icicle').data[0].ids.length")
    assert given == sum(d <= 6 for d in depth.values() if d >= 0) < len(data["id"]), "six levels in view, one more"
    for click in (None, "encoder"):
        if click:
            browser.evaluate(
                f"""Array.from(document.querySelectorAll('#icicle g.slice')).find(s => (s.querySelector('text tspan')
                || {{}}).textContent === '{click}').dispatchEvent(new MouseEvent('click', {{bubbles: true}}))"""
            )
            browser.evaluate("new Promise(done => setTimeout(done, 1500))")  # plotly animates the zoom
        level = browser.evaluate("document.getElementById('icicle').data[0].level")
        assert data["label"][data["id"].index(level)] == (click or "whole run")
        browser.evaluate("document.getElementById('all-nodes') && document.getElementById('all-nodes').remove()")
        assert browser.evaluate(f"{ALL_NODES}({json.dumps(level)})") == len(data["id"])
        shown, reference = browser.evaluate(f"{SHOWN_BOXES}('icicle')"), browser.evaluate(f"{SHOWN_BOXES}('all-nodes')")
        assert len(shown) > 40 and shown == reference
    assert browser.console_errors() == []


def test_a_zoom_draws_the_icicle_again_at_most_once(browser, pages):
    """A zoom animates over both views' nodes, then gives plotly the new view's alone only where those of the old
    it leaves out are many: each full drawing of a wide view costs seconds."""
    browser.open(pages["bert"])
    redraws = browser.evaluate(
        """(async () => {
        const gd = document.getElementById('icicle'), react = Plotly.react, counts = [];
        let redraws = 0;
        Plotly.react = function (...a) { redraws++; return react.apply(this, a); };
        for (const label of ['encoder', 'encoder']) {  // in, then out (a click on the view's top box)
            redraws = 0;
            Array.from(gd.querySelectorAll('g.slice')).find(s => (s.querySelector('text tspan') || {}).textContent
                === label).dispatchEvent(new MouseEvent('click', {bubbles: true}));
            await new Promise(done => setTimeout(done, 1500));
            counts.push([redraws, gd.data[0].level]);
        }
        Plotly.react = react;
        return counts; })()"""
    )
    data = _page_data(pages["bert"])["icicle"]
    encoder, root = data["id"][data["label"].index("encoder")], data["id"][data["parent"].index("")]
    assert [level for _, level in redraws] == [encoder, root]
    assert all(count <= 1 for count, _ in redraws) and sum(count for count, _ in redraws) < 2, redraws
    assert browser.console_errors() == []


def test_hostile_names_stay_text_in_chromium(browser, pages):
    browser.open(pages["hostile"])  # a plain trace, its calls named after its operators
    assert browser.console_errors() == []
    assert browser.evaluate("window.injected") is None, "no name ran as a script"
    assert HOSTILE in browser.evaluate("document.body.innerText"), "shown as the text it is"
    labels = browser.evaluate("document.getElementById('icicle').data[0].labels")
    escaped = HOSTILE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert escaped in labels, "handed to plotly as entities, which it shows as text, not as its <b>, <br>… tags"
    assert browser.evaluate(CHART_TEXT.format("top-calls")), "the calls' chart is drawn"


def test_the_comparison_draws_in_chromium(browser, pages):
    browser.open(pages["compare"])
    assert browser.console_errors() == []
    assert browser.requested_urls() == [pages["compare"].resolve().as_uri()]
    bars = set(browser.evaluate(CHART_TEXT.format("deltas")))
    assert {"conv2d", "batch_norm", "max_pool2d"} <= bars
    colours = browser.evaluate(
        "Array.from(document.querySelectorAll('tr.worse td.change, tr.better td.change'))"
        ".map(td => getComputedStyle(td).color)"
    )
    assert {"rgb(207, 34, 46)", "rgb(26, 127, 55)"} <= set(colours), "red for worse, green for better"


def _kernel_table_headers(page) -> list[str]:
    section = page.read_text().split('<section id="kernels">', 1)[1].split("</table>", 1)[0]
    return [cell.split("</th>", 1)[0].strip() for cell in section.split("<th")[1:] if ">" in cell]


def test_a_cpu_recordings_kernel_table_counts_cpu_operators_not_launches(demo_run, pages, tmp_path):
    """A CPU recording's rows are CPU operators, which launch nothing: its table counts them as the other CPU views
    name them (analyze --by: cpu_operators; the footer: CPU operator rows)."""
    with load_run(demo_run[-1]) as run:
        write_report(run, tmp_path / "cpu.html", name="cpu")
    cpu, gpu = _kernel_table_headers(tmp_path / "cpu.html"), _kernel_table_headers(pages["bert"])
    assert 'class="num">CPU operators' in cpu and not any("launches" in header for header in cpu)
    assert 'class="num">launches' in gpu


def test_a_cpu_recordings_page_names_its_rows_cpu_operators_not_device_time_and_kernels(demo_run, pages, tmp_path):
    """The README's first recording is on the CPU: its page said "device time 155,633.6 µs in 390 rows", "Where the
    device time goes: module → call → kernel" and "The costliest kernels" of rows that are CPU operators, which the
    command line's footer calls "390 CPU operator rows". A GPU run's page keeps its words."""
    with load_run(demo_run[-1]) as run:
        write_report(run, tmp_path / "cpu.html", name="cpu")
    cpu, gpu = (_section(page, "tree") + _section(page, "kernels") for page in (tmp_path / "cpu.html", pages["bert"]))
    cpu_header, gpu_header = ((tmp_path / "cpu.html").read_text(), pages["bert"].read_text())
    assert "CPU operator time</dt>" in cpu_header and re.search(r"µs in [\d,]+ CPU operator rows</dd>", cpu_header)
    assert "<h2>Where the CPU operator time goes: module → call → CPU operator</h2>" in cpu
    words = re.sub(r"<[^>]*>", "", cpu)
    title = words.split("The costliest", 1)[1].split("By name", 1)[0]
    assert "<h2>The costliest CPU operators</h2>" in cpu and "kernel" not in title
    assert "device time</dt>" in gpu_header and "<h2>The costliest kernels</h2>" in gpu
    assert "<h2>Where the device time goes: module → call → kernel</h2>" in gpu


def _section(page, name: str) -> str:
    text = page.read_text()
    return text[text.index(f'<section id="{name}">') :].split("</section>", 1)[0]


def test_the_trace_section_names_the_scopes_by_the_run_s_prefixes(pages):
    """It named them ks.module:… and ks.fn:… whatever prefixes the run was read with (aitune's ait_nn_module:…)."""
    section = _section(pages["hostile"], "trace")  # read with module_prefix="probe:"
    assert "<code>probe:…</code>" in section and "ks.module:" not in section
    assert "<code>ks.module:…</code>" in _section(pages["bert"], "trace")


def test_the_comparison_names_the_root_module_as_kernelscope_diff_does(tmp_path):
    """The root module's "" was a blank name cell in the page's module table, where `kernelscope diff` says (root)."""
    with load_run(SAMPLES / "demo") as a, load_run(SAMPLES / "demo") as b:  # its root module runs kernels
        text = write_comparison(a, b, tmp_path / "compare.html", names=("a", "b")).read_text()
    assert '<td class="name">(root)</td>' in text and '<td class="name"></td>' not in text


def test_an_archived_runs_report_is_named_after_the_run_not_the_archive(tmp_path, monkeypatch):
    """`report ARCHIVE --run ID` wrote ./<archive>-report.html for every run of it: a second run's report was refused
    as already there, where `report --archive ARCHIVE ID` names it after the run."""
    monkeypatch.chdir(tmp_path)
    archive_runs([SAMPLES / "demo", SAMPLES / "mlp"], tmp_path / "archive")
    for name in ("demo", "mlp"):
        result = CliRunner().invoke(main, ["report", str(tmp_path / "archive"), "--run", name])
        assert result.exit_code == 0 and result.output == f"report: {name}-report.html\n", result.output
