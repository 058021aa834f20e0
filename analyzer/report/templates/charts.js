// Draws the page's charts from KS (the views' rows, column by column) and sets window.ksReady once every one
// is drawn. Plotly's own click-to-zoom serves the icicle: click a node to zoom in, the bar above it to go back.
(function () {
  "use strict";
  const KIND_COLORS = {module: "#4c78a8", call: "#f58518", kernel: "#9da5b0", more: "#d8dee4"};
  const CHANGE_COLORS = {worse: "#cf222e", better: "#1a7f37", same: "#8c959f"};
  const CONFIG = {displaylogo: false, responsive: true, displayModeBar: false};
  const FONT = {family: "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif", size: 12};
  const MONO = "ui-monospace, Menlo, monospace";

  // Plotly reads a few HTML tags in its text (<b>, <br>…): names are text, so their < > & are written as entities.
  function esc(text) {
    return text === null ? "" : String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function us(value) {
    return value.toLocaleString("en-US", {minimumFractionDigits: 1, maximumFractionDigits: 1});
  }

  function signed(value) {
    return (value > 0 ? "+" : "") + value.toFixed(Math.abs(value) < 1 ? 2 : 1);
  }

  function rows(columns, names) {
    return columns[names[0]].map((_, i) => names.map((name) => columns[name][i]));
  }

  // Plotly draws every node it is given, those below its maxdepth levels shrunk to nothing but each as costly to draw
  // as one in view: it gets the nodes in view, one level more (so that the lowest in view keep their children) and
  // the path above them (its path bar). A node given without its children is sized by its whole time.
  const MAXDEPTH = 6;
  const ZOOM = {  // plotly's own zoom on a click (treemap's and icicle's CLICK_TRANSITION_TIME and _EASING)
    frame: {redraw: false, duration: 750}, transition: {duration: 750, easing: "poly"}, mode: "immediate",
    fromcurrent: true,
  };

  function icicle(element, d) {
    const row = new Map(d.id.map((id, i) => [id, i]));
    const up = d.parent.map((parent) => (parent === "" ? -1 : row.get(parent)));
    const children = d.id.map(() => []);
    up.forEach((parent, i) => parent >= 0 && children[parent].push(i));
    const labels = d.label.map(esc);
    const hover = rows(Object.assign({}, d, {detail: d.detail.map(esc)}),
      ["detail", "time_us", "share_pct", "kernels", "kind"]);
    const colors = d.kind.map((kind) => KIND_COLORS[kind]);

    function mark(keep, entry) {  // the path above entry, and entry's subtree down to MAXDEPTH levels below it
      for (let i = up[entry]; i >= 0; i = up[i]) keep[i] = true;
      let level = [entry];
      for (let depth = 0; depth <= MAXDEPTH && level.length; depth++) {
        level.forEach((i) => { keep[i] = true; });
        level = level.flatMap((i) => children[i]);
      }
    }

    // The trace with `level` in view, of the nodes that the views of `entries` show (in the views' order).
    function trace(entries, level) {
      const keep = d.id.map(() => false);
      entries.forEach((entry) => mark(keep, entry));
      const shown = keep.flatMap((kept, i) => (kept ? [i] : []));
      const pick = (list) => shown.map((i) => list[i]);
      const whole = (i) => children[i].length && !children[i].some((child) => keep[child]);
      return {
        type: "icicle",
        ids: pick(d.id), parents: pick(d.parent), labels: pick(labels),
        values: shown.map((i) => (whole(i) ? d.time_us[i] : d.value_us[i])),
        level: d.id[level],
        branchvalues: "remainder",
        customdata: pick(hover),
        hovertemplate: "<b>%{label}</b> (%{customdata[4]})<br>%{customdata[0]}<br>%{customdata[1]:,.1f} µs, " +
          "%{customdata[2]:.2f}% of the run<br>%{customdata[3]:,} device rows<extra></extra>",
        texttemplate: "%{label}<br>%{customdata[2]:.1f}%",
        marker: {colors: pick(colors), line: {color: "#fff", width: 1}},
        tiling: {orientation: "v"},
        pathbar: {visible: true, side: "top"},
        maxdepth: MAXDEPTH,
        sort: false,
      };
    }

    const layout = () => ({height: 620, margin: {t: 28, l: 4, r: 4, b: 4}, font: FONT});
    let entry = up.indexOf(-1), zooming = false;
    return Plotly.newPlot(element, [trace([entry], entry)], layout(), CONFIG).then(() => {
      // a click zooms as plotly's does, over the two views' nodes together; then plotly gets the new view's alone only
      // where those of the old it leaves out are many: drawing every node in view again costs more than they do
      element.on("plotly_icicleclick", (event) => {
        const next = row.get(event.nextLevel);
        if (next === undefined || next === entry || zooming) return false;
        zooming = true;
        const both = trace([entry, next], next), alone = trace([next], next);
        const many = both.ids.length - alone.ids.length > alone.ids.length / 10;
        Plotly.animate(element, {data: [both], traces: [0]}, ZOOM)
          .then(() => many && Plotly.react(element, [alone], layout(), CONFIG))
          .then(() => { entry = next; }, (error) => console.error(error))
          .then(() => { zooming = false; });
        return false;
      });
    });
  }

  // A horizontal bar chart, the first row on top.
  function bars(element, labels, values, texts, colors, hover, xTitle) {
    const top = (list) => list.slice().reverse();
    return Plotly.newPlot(element, [{
      type: "bar", orientation: "h",
      y: top(labels.map(esc)), x: top(values), text: top(texts), textposition: "auto",
      marker: {color: Array.isArray(colors) ? top(colors) : colors},
      customdata: top(hover), hovertemplate: "%{customdata}<extra></extra>",
    }], {
      height: Math.max(240, 26 * labels.length + 70), margin: {t: 10, l: 10, r: 20, b: 44}, font: FONT,
      xaxis: {title: {text: xTitle}, zeroline: true}, yaxis: {automargin: true, tickfont: {family: MONO}},
    }, CONFIG);
  }

  function draw() {
    const drawn = [];
    const tree = document.getElementById("icicle");
    if (tree && KS.icicle) drawn.push(icicle(tree, KS.icicle));

    const calls = document.getElementById("top-calls");
    if (calls && KS.calls) {
      const c = KS.calls;
      drawn.push(bars(calls, c.function_name, c.time_spent_us, c.time_spent_pct.map((p) => p.toFixed(1) + "%"),
        KIND_COLORS.module,
        c.function_name.map((name, i) => `<b>${esc(name)}</b><br>${us(c.time_spent_us[i])} µs, ` +
          `${c.time_spent_pct[i].toFixed(2)}% of the named calls<br>` +
          (c.calls[i] === null ? "calls not counted" : `${c.calls[i]} calls`)),
        "device time (µs)"));
    } else if (calls && KS.ops) {
      const o = KS.ops;
      const names = o.op.map((op) => (op === null ? "(no operator)" : op));
      drawn.push(bars(calls, names, o.time_us, o.share_pct.map((p) => p.toFixed(1) + "%"), KIND_COLORS.module,
        names.map((name, i) => `<b>${esc(name)}</b><br>${us(o.time_us[i])} µs, ${o.kernels[i]} device rows`),
        "device time (µs)"));
    }

    const deltas = document.getElementById("deltas");
    if (deltas && KS.chart) {
      const c = KS.chart;
      drawn.push(bars(deltas, c.label, c.delta_us, c.delta_us.map(signed), c.change.map((ch) => CHANGE_COLORS[ch]),
        c.label.map((name, i) => `<b>${esc(name)}</b><br>A ${us(c.time_a_us[i])} µs → B ${us(c.time_b_us[i])} µs`),
        "change in device time, B − A (µs)"));
    }
    return Promise.all(drawn);
  }

  // The tables are on the screen before the charts are drawn: drawing waits for the first frame.
  requestAnimationFrame(() => setTimeout(() => {
    draw().then(() => {
      window.ksReadyMs = performance.now();
      window.ksReady = true;
    }, (error) => console.error(error));
  }, 0));
})();
