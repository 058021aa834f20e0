"""Percent-escaped names (manifest annotation.name_escape "percent", docs/format.md) that no recorder writes: a `%`
alone or before fewer than two hex digits, `%ZZ`, `%2540` (an escaped `%40`), `%40` where the call name's `@` goes,
100,000 escapes, a NUL, `@` where the module separator stands or in the prefixes, and a manifest whose prefix ends in
half an escape. Each run loads with the names read back, or is refused in one line naming the trace, exit 2."""

import gzip
import json
import shutil

import pytest
from click.testing import CliRunner
from kernelscope.analyzer import load_run
from kernelscope.cli import main
from test_bad_input import RUN


def _run(tmp_path, calls: dict, modules=None, prefixes=("ks.fn:", "ks.module:"), escape=True, samples=None):
    """The mlp run with its call scopes' names mapped by ``calls`` (the part before '#'), its module scopes' by
    ``modules``, under ``prefixes`` (function, module), and samples.json's function names by ``samples``."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["annotation"].update(function_prefix=prefixes[0], module_prefix=prefixes[1])
    if escape:
        manifest["annotation"]["name_escape"] = "percent"
    (run / "manifest.json").write_text(json.dumps(manifest))
    doc = json.loads(gzip.decompress((run / "trace.json.gz").read_bytes()))
    for event in doc["traceEvents"]:
        name = event.get("name", "")
        if name.startswith("ks.fn:"):
            call, _, sample = name.removeprefix("ks.fn:").partition("#")
            event["name"] = f"{prefixes[0]}{calls.get(call, call)}#{sample}"
        elif name.startswith("ks.module:"):
            module = name.removeprefix("ks.module:")
            event["name"] = prefixes[1] + (modules(module) if modules else module)
    (run / "trace.json.gz").write_bytes(gzip.compress(json.dumps(doc).encode()))
    store = json.loads((run / "samples.json").read_text())
    store["functions"] = {(samples or {}).get(k, k): v for k, v in store["functions"].items()}
    (run / "samples.json").write_text(json.dumps(store))
    return run


READ_BACK = {  # calls as written in the trace, and the name each reads back as (samples.json holds that name)
    "a percent alone": ({"linear": "%", "relu": "re%lu"}, {"linear": "%", "relu": "re%lu"}),
    "a percent before one hex digit": ({"linear": "lin%4", "relu": "%4"}, {"linear": "lin%4", "relu": "%4"}),
    "a percent before no hex digit": ({"linear": "%ZZ", "relu": "%%"}, {"linear": "%ZZ", "relu": "%%"}),
    "an escaped %40": ({"linear": "%2540"}, {"linear": "%40"}),
    "an @ escaped in a call": ({"linear": "lin%40ear"}, {"linear": "lin@ear"}),
    "100,000 escapes": ({"linear": "%C3%A9" * 50_000}, {"linear": "é" * 50_000}),
    "a NUL": ({"linear": "a%00b"}, {"linear": "a\x00b"}),
}


@pytest.mark.parametrize("case", READ_BACK)
def test_odd_escapes_read_back_as_url_decoding_reads_them(case, tmp_path):
    calls, names = READ_BACK[case]
    run = load_run(_run(tmp_path, calls, samples=names))
    called = set(run.sql("SELECT DISTINCT function_name FROM kernels WHERE function_name IS NOT NULL")["function_name"])
    assert set(names.values()) <= called, called


REFUSED = {  # (calls, modules, prefixes), the scope the message names
    "half an escape in a call": ({"linear": "%41" * 1000 + "%C3"}, None, None, "('ks.fn:%41%41"),
    "a surrogate escaped": ({"relu": "%ED%A0%80"}, None, None, "('ks.fn:%ED%A0%80#0')"),
    "half an escape in a module": ({}, lambda m: m + "%E9", None, "('ks.module:%E9')"),
    # the prefix's %C3 and the name's %A9 make an é of the whole name, but the macros decode the name alone: they
    # raised DuckDB's InvalidInputException, a traceback, where the check decoded the whole name
    "a prefix that ends in half an escape": ({"linear": "%A9x", "relu": "%A9y"}, None, ("ks.fn:%C3", "ks.module:"),
                                             "('ks.fn:%C3%A9x#0')"),
}  # fmt: skip


@pytest.mark.parametrize("case", REFUSED)
@pytest.mark.parametrize("command", ["analyze", "tree", "sql"])
def test_escapes_that_are_not_utf8_are_one_line_naming_the_trace(case, command, tmp_path):
    calls, modules, prefixes, scope = REFUSED[case]
    samples = dict(calls) if prefixes else None  # the calls as the recorder named them
    run = _run(tmp_path, calls, modules, prefixes or ("ks.fn:", "ks.module:"), samples=samples)
    args = [command, str(run)] + (["SELECT count(*) FROM kernels"] if command == "sql" else [])
    done = CliRunner().invoke(main, args)
    assert done.exit_code == 2 and isinstance(done.exception, SystemExit), done.exception
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"kernelscope: error: {run / 'trace.json.gz'}: traceEvents["), line
    assert line.endswith(") has a %-escape that is not UTF-8") and scope in line, line


@pytest.mark.parametrize("escape", [True, False])
def test_at_signs_where_the_separator_stands_load(escape, tmp_path):
    """A call named '@' or '@@relu@' reads as an empty call with a module folded in, a module named '@0@' as itself;
    prefixes holding '@'. The samples of calls no scope names are noted, not refused."""
    run = _run(tmp_path, {"linear": "@", "relu": "@@relu@"}, lambda m: f"@{m}@", escape=escape)
    assert len(load_run(run).sql("SELECT * FROM kernels")) > 0
    shutil.rmtree(run)
    run = _run(tmp_path, {}, prefixes=("ks@fn:", "ks@m:"), escape=escape)
    assert len(load_run(run).sql("SELECT * FROM kernels")) > 0
