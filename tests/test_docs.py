"""Every example of every doc runs: README.md and docs/*.md (but NOT_RUN's, which say why), read block by block
from their fenced code.

- ```sql: each statement runs on the sample run sample_traces/demo (under "## Archives": on an archive of
  sample_traces/mlp and a copy of sample_traces/demo tagged team=infra) and returns rows, or none where its
  comment says "no rows on".
- ```console: each `$ kernelscope …` line runs (the lines after it that close its quotes belong to it), in a
  folder of the doc's own where RUN is sample_traces/demo, JOB a job of it and mlp as ranks 0 and 1, ARCHIVE that
  archive, ID one of its runs and "SELECT ..." a query; it exits 0. The lines under it are what it printed:
  exactly, when it reads only sample_traces/ (its numbers are those of the checked-in H200 runs); its table's
  header, when it records here.
- ```python: each block runs, in order, in that folder; a block that imports what is not installed (polars,
  pyspark) is skipped. A ```text block right after a block is what the block printed, exactly.
- ```json: parses; a samples.json example decodes as the analyzer decodes samples.json.
- a plain block drawing RUN/ or ARCHIVE/: every file it names is in a run directory recorded here or in the
  archive.
- ```bash (the README's install and test lines) is not run here (CI runs it): its torch pin is .ci/run's.
"""

import ast
import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import REPO, make_job
from kernelscope.analyzer import archive_runs, load_run
from kernelscope.analyzer.archive import Archive
from kernelscope.cli import main

NOT_RUN = {  # docs whose examples cannot run in CI, and why
    "docs/bench.md": "bench replays a run's calls on the GPU it was recorded on, against the reader's own kernels",
}
DOCS = [
    doc
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    if doc.relative_to(REPO).as_posix() not in NOT_RUN
]
SAMPLE_RUN = REPO / "sample_traces" / "demo"
DEMO_COMMAND = ["demo", "--out", "demo-run"]  # run once for the whole suite: conftest's demo_command


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str
    section: str  # the "## " heading it is under
    printed: str | None = None  # a ```text block right after it


def blocks(doc: Path) -> list[Block]:
    found, section, lines = [], "", doc.read_text().splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.startswith("## "):
            section = line[3:]
        match = re.match(r"^```(\w*)\s*$", line)
        if match:
            end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
            found.append(Block(doc, index + 1, match.group(1), "\n".join(lines[index + 1 : end]) + "\n", section))
            index = end
        index += 1
    for block, following in zip(found, found[1:], strict=False):
        closing = block.line + block.text.count("\n")  # 0-based index of the closing fence
        between = lines[closing + 1 : following.line - 1]
        if following.lang == "text" and not any(line.strip() for line in between):
            block.printed = following.text
    return found


def of_lang(*langs: str) -> list[Block]:
    return [block for doc in DOCS for block in blocks(doc) if block.lang in langs]


def block_id(block: Block) -> str:
    return f"{block.doc.relative_to(REPO)}:{block.line}"


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("docs-archive")
    tagged = tmp / "demo"
    shutil.copytree(SAMPLE_RUN, tagged)
    manifest = json.loads((tagged / "manifest.json").read_text())
    manifest["tags"] = {"team": "infra"}
    (tagged / "manifest.json").write_text(json.dumps(manifest))
    archive_runs([REPO / "sample_traces" / "mlp", tagged], tmp / "archive")
    return tmp / "archive"


@pytest.fixture(scope="module")
def folders(tmp_path_factory, archive) -> dict:
    """One working folder per doc, made as a reader's would be: the repository's sample traces, RUN, ARCHIVE."""
    made = {}
    for doc in DOCS:
        folder = tmp_path_factory.mktemp(doc.stem)
        (folder / "sample_traces").symlink_to(REPO / "sample_traces")
        (folder / "RUN").symlink_to(SAMPLE_RUN)
        (folder / "RUN_A").symlink_to(SAMPLE_RUN)  # two runs to compare: the same model would be the usual case
        (folder / "RUN_B").symlink_to(REPO / "sample_traces" / "mlp")
        (folder / "ARCHIVE").symlink_to(archive)
        make_job(folder / "JOB", {0: SAMPLE_RUN, 1: REPO / "sample_traces" / "mlp"})
        made[doc] = folder
    return made


@contextlib.contextmanager
def working_in(folder: Path):
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def statements(sql: str) -> list[tuple[str, bool]]:
    """Each statement, and whether its comment says it returns no rows on the sample run."""
    found = []
    for part in sql.split(";"):
        lines = part.strip().splitlines()
        comment = " ".join(line for line in lines if line.lstrip().startswith("--"))
        code = "\n".join(line for line in lines if not line.lstrip().startswith("--")).strip()
        if code:
            found.append((code, "no rows on" in comment))
    return found


@pytest.mark.parametrize("block", of_lang("sql"), ids=block_id)
def test_sql_examples_run_and_return_rows(block, archive):
    source = Archive(archive) if block.section == "Archives" else load_run(SAMPLE_RUN)
    with source:
        for statement, empty in statements(block.text):
            rows = len(source.sql(statement))
            assert (rows == 0) if empty else (rows > 0), f"{block_id(block)}: {rows} rows from\n{statement}"


def commands(console: str) -> list[tuple[str, list[str]]]:
    """(command line, the lines printed under it) for each `$ ` line of a console block."""
    found: list[tuple[list[str], list[str]]] = []
    quotes_open = False
    for line in console.splitlines():
        if quotes_open:
            found[-1][0].append(line.strip())
        elif line.startswith("$ "):
            found.append(([line[2:]], []))
        else:
            if found:
                found[-1][1].append(line)
            continue
        try:
            shlex.split(" ".join(found[-1][0]), comments=True)
            quotes_open = False
        except ValueError:  # "No closing quotation": the command goes on on the next line
            quotes_open = True
    return [(" ".join(parts), printed) for parts, printed in found]


def run_command(argv: list[str], demo_command) -> tuple[int, str]:
    if argv == DEMO_COMMAND:  # the suite's one CPU recording of the demo, made in a folder of its own
        folder, output = demo_command
        shutil.copytree(folder / "demo-run", "demo-run")
        return 0, output
    result = CliRunner().invoke(main, argv, input="")
    return result.exit_code, result.output


def _only_sample_traces(argv: list[str]) -> bool:
    paths = [arg for arg in argv[1:] if not arg.startswith("-") and ("/" in arg or arg in ("RUN", "ARCHIVE", "JOB"))]
    return bool(paths) and all(arg.startswith(("sample_traces/", "RUN")) for arg in paths)


def _header(printed: list[str]) -> str | None:
    return next((line for line in printed if line.startswith("┃")), None)


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_console_examples_run_and_print_what_the_doc_shows(doc, folders, archive, demo_command):
    run_id = Archive(archive).resolve("mlp")
    substitutions = {
        "ID": run_id,
        "ID_A": run_id,
        "ID_B": Archive(archive).resolve("demo"),
        "SELECT ...": "SELECT count(*) AS n FROM kernels",
        "SELECT …": "SELECT 1 AS n",
    }
    ran = 0
    with working_in(folders[doc]):
        for block in (b for b in blocks(doc) if b.lang == "console"):
            for command, printed in commands(block.text):
                argv = [substitutions.get(arg, arg) for arg in shlex.split(command, comments=True)]
                assert argv[0] == "kernelscope", f"{block_id(block)}: {command}"
                code, output = run_command(argv[1:], demo_command)
                assert code == 0, f"{block_id(block)}: {command}\n{output}"
                actual = [line.rstrip() for line in output.splitlines()]
                shown = [line.rstrip() for line in printed]
                if shown and _only_sample_traces(argv):
                    assert actual == shown, f"{block_id(block)}: {command} prints otherwise"
                elif shown:
                    header = _header(shown)
                    assert header is None or header in actual, f"{block_id(block)}: {command} prints another table"
                ran += 1
    if any(b.lang == "console" for b in blocks(doc)):
        assert ran > 0


def _importable(code: str) -> list[str]:
    """The top-level modules a block imports that are not installed."""
    missing = []
    for node in ast.walk(ast.parse(code)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module]
        missing += [name for name in names if importlib.util.find_spec(name.split(".")[0]) is None]
    return missing


@pytest.mark.parametrize(
    "doc",
    [doc for doc in DOCS if any(b.lang == "python" for b in blocks(doc))],
    ids=lambda doc: str(doc.relative_to(REPO)),
)
def test_python_examples_run(doc, folders):
    skipped = []
    namespace: dict = {}
    with working_in(folders[doc]):
        for block in (b for b in blocks(doc) if b.lang == "python"):
            missing = _importable(block.text)
            if missing:
                skipped.append(f"{block_id(block)} (needs {', '.join(missing)})")
                continue
            if "import torch" in block.text or "kernelscope.demo" in block.text:
                pytest.importorskip("torch")
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(block.text, block_id(block), "exec"), namespace)  # noqa: S102 (the doc's own code)
            if block.printed is not None:
                assert printed.getvalue() == block.printed, f"{block_id(block)} prints otherwise"
    assert len(skipped) < sum(b.lang == "python" for b in blocks(doc)), "at least one block ran"


@pytest.mark.parametrize("block", of_lang("json"), ids=block_id)
def test_json_examples_parse_and_samples_decode(block, tmp_path):
    from kernelscope.analyzer.samples import TensorMeta, function_data_from_store, read_samples

    document = json.loads(block.text)
    if "functions" in document:  # a samples.json: read and decoded as the analyzer reads one
        (tmp_path / "samples.json").write_text(block.text)
        data = function_data_from_store(read_samples(tmp_path / "samples.json"), tmp_path / "samples.json")
        for entries in data.values():
            for _calls, (args, _kwargs) in entries:
                assert all(isinstance(arg, TensorMeta) for arg in args if not isinstance(arg, (int, float, str)))


@pytest.mark.parametrize("block", [b for b in of_lang("") if b.text.startswith(("RUN/", "ARCHIVE/"))], ids=block_id)
def test_drawn_layouts_name_files_that_exist(block, demo_command, archive):
    folder, _ = demo_command
    for line in block.text.splitlines()[1:]:  # the first names the folder itself
        if not line.strip():
            continue
        name = line.split()[0]
        if block.text.startswith("RUN/"):
            optional = "optional" in line
            assert (folder / "demo-run" / name).exists() or optional, f"{block_id(block)}: no {name} in a run"
        elif "optional" not in line:
            pattern = re.sub(r"<[^>]+>", "*", name.removeprefix("ARCHIVE/"))
            assert list(archive.glob(pattern)), f"{block_id(block)}: nothing in an archive matches {name}"


def test_the_docs_left_out_are_there_and_hold_examples():
    for doc in NOT_RUN:
        assert any(block.lang for block in blocks(REPO / doc)), f"{doc} has no examples: run it with the others"


def test_the_readme_installs_torch_as_ci_does():
    (install, *_), ci = [b.text for b in blocks(REPO / "README.md") if b.lang == "bash"], (REPO / ".ci/run")
    pins = set(re.findall(r"torch==[0-9.]+", install))
    assert pins and pins == set(re.findall(r"torch==[0-9.]+", ci.read_text()))
    assert "bash .ci/run" in [b.text for b in blocks(REPO / "README.md") if b.lang == "bash"][0]


def test_the_signature_of_profile_the_docs_show_is_its_own():
    """recording.md showed profile(fn, samples, *, …): profile(model, samples=…) is a TypeError, the name is data."""
    pytest.importorskip("torch")
    import inspect

    from kernelscope.recorder import ModuleFunctionKernelProfiler

    shown = [m for doc in DOCS for m in re.findall(r"`profile\((fn, [^`]*)\)`", doc.read_text())]
    own = inspect.signature(ModuleFunctionKernelProfiler.profile).parameters
    assert shown
    for parameters in shown:
        for part in (p.strip() for p in parameters.split(",")):
            name, _, default = part.partition("=")
            assert part == "*" or name in own, f"profile() has no parameter {name}"
            assert not default or repr(own[name].default) == default, f"{name}'s default is {own[name].default!r}"


def test_every_field_a_manifest_holds_is_in_format_md(demo_command):
    """annotation.scope was written by every recording and named nowhere ("the scope mechanism")."""
    folder, _ = demo_command
    manifest = json.loads((folder / "demo-run" / "manifest.json").read_text())
    text = (REPO / "docs" / "format.md").read_text()
    section = text[text.index("## manifest.json") : text.index("## samples.json")]
    fields = [*manifest, *(key for value in manifest.values() if isinstance(value, dict) for key in value)]
    assert [field for field in fields if f"`{field}`" not in section and field not in manifest["tags"]] == []
