"""The report's HTML: jinja2 templates (templates/) filled with the views' rows, plotly.js and the page's own
script and style inlined, so that the one file opens offline."""

from __future__ import annotations

import math
import os
import re
from functools import cache
from pathlib import Path

import pandas as pd

from ..atomic import replace_atomically
from ..errors import KernelscopeError
from .views import ICICLE_MIN_PCT, RunHeader, RunViews

REPORT_EXTRA = "the report needs jinja2 and plotly: pip install 'kernelscope[report]'"


@cache
def plotly_js() -> str:
    """plotly.js as the plotly package ships it (its ``get_plotlyjs``), safe to inline in a <script> element."""
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise KernelscopeError(None, REPORT_EXTRA) from None
    return inline_script(parents_by_id(get_plotlyjs()))


# plotly.js's getParent(hierarchy, node): a walk of the whole tree, and a copy of the parent's subtree, per call
_GET_PARENT = re.compile(r"(\w+)\.getParent=function\((\w+),(\w+)\)\{return \1\.findEntryWithLevel\(\2,(\w+)\(\3\)\)\}")


def parents_by_id(code: str) -> str:
    """plotly.js with its icicle's parent lookup made a look-up by id, in a map made once per tree: plotly calls it
    for every box it draws, and its own search of the whole tree made a page of 11,000 boxes take 9 s to draw. The
    parent found is the node itself, not plotly's copy of it, which its callers read only the value and label of.
    A bundle that words it otherwise is left as it is (slower, as correct)."""

    def indexed(match: re.Match) -> str:
        helpers, tree, node, parent_id = match.groups()
        # its own names start with ks: they shadow none of the bundle's minified names it calls
        return (
            f"{helpers}.getParent=(function(){{var ksTrees=new WeakMap;return function({tree},{node}){{"
            f"var ksId={parent_id}({node});if(!ksId)return {tree};var ksIds=ksTrees.get({tree});if(!ksIds){{"
            f"ksIds=new Map;{tree}.each(function(ksNode){{ksIds.set({helpers}.getPtId(ksNode),ksNode)}});"
            f"ksTrees.set({tree},ksIds)}}return ksIds.get(ksId)||{tree}}}}})()"
        )

    return _GET_PARENT.sub(indexed, code, count=1)


def inline_script(code: str) -> str:
    """JavaScript that an HTML parser reads to its end inside <script>: no "</script" or "<!--" in it (written
    with a backslash before "/" or "!": the same characters in a string or a regular expression, where they occur)."""
    return re.sub(r"</(script)", lambda m: "<\\/" + m.group(1), code, flags=re.IGNORECASE).replace("<!--", "<\\!--")


def environment():
    try:
        import jinja2
    except ImportError:
        raise KernelscopeError(None, REPORT_EXTRA) from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("kernelscope.analyzer.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(us=_us, us_mean=_us_mean, pct=_pct, count=_count, ratio=_ratio, signed=_signed)
    return env


def render_report(views: RunViews, version: str) -> str:
    """The single-run page."""
    data = {
        "icicle": _columns(views.icicle),
        "calls": _columns(views.top_calls) if len(views.top_calls) else None,
        "ops": _columns(views.ops),
    }
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            run=views,
            data=data,
            plotly=plotly_js(),
            version=version,
            multirank=views.header.totals["ranks"] > 1,
            icicle_min_pct=ICICLE_MIN_PCT,
        )
    )


def render_comparison(
    a: RunHeader, b: RunHeader, rows: pd.DataFrame, chart: pd.DataFrame, version: str, differences: list[str] = ()
) -> str:
    """The page comparing run B against run A; ``differences``: what sets the runs apart besides the model's time
    (diff.differences), each said under the total."""
    levels = {level: group for level, group in rows.groupby("level", sort=False)}
    data = {"chart": _columns(chart)}
    page = environment().get_template("compare.html.j2")
    return page.render(a=a, b=b, levels=levels, data=data, plotly=plotly_js(), version=version, differences=differences)


def write_html(path: Path, html: str, *, overwrite: bool = True) -> None:
    """``html`` to ``path`` through a temporary sibling: no half-written page; readable as the umask allows, like
    any file the user writes (the temporary file is private)."""
    umask = os.umask(0)
    os.umask(umask)

    def write(tmp: str) -> None:
        # a path that is not UTF-8 (a run's folder named in Latin-1) holds surrogates, written as their escapes
        Path(tmp).write_text(html, encoding="utf-8", errors="backslashreplace")
        os.chmod(tmp, 0o666 & ~umask)

    replace_atomically(path, write, overwrite=overwrite)


def _columns(frame: pd.DataFrame) -> dict[str, list]:
    """A frame as {column: values}: the compact form the page's script hands to plotly."""
    return {column: [_plain(v) for v in frame[column]] for column in frame.columns}


def _plain(value):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return value.item() if hasattr(value, "item") else value


def _missing(value) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _number(value, spec: str, suffix: str = "") -> str:
    """``value`` formatted, "–" where missing, "new" where infinite (what is new in run B)."""
    if _missing(value):
        return "–"
    return "new" if math.isinf(value) else f"{value:{spec}}{suffix}"


def _us(value) -> str:
    return _number(value, ",.1f")


def _us_mean(value) -> str:
    return _number(value, ",.2f")  # a mean per call or kernel: a short kernel's 2.35 µs keeps its second decimal


def _pct(value) -> str:
    return _number(value, ".1f", "%")


def _signed(value, unit: str = "") -> str:
    return _number(value, f"+,.{2 if not _missing(value) and abs(value) < 1 else 1}f", unit)  # -0.03, not -0.0


def _count(value) -> str:
    return "–" if _missing(value) else f"{int(value):,}"


def _ratio(value) -> str:
    return _number(value, ".3f", "×")
