// samark's detection page, its drawing: the DOM helpers, how a p-value is written, and the
// two charts (the p-value as sentences are added; each sentence's own evidence), SVG drawn
// at a box's own width. Loaded before page.js, which takes them from window.samarkDrawing.
"use strict";

window.samarkDrawing = (() => {
  // A sentence is shaded only when its own p-value (both layers joined, for a layered
  // mark) is below SHADE_P: evidence worth the name on its own. A sentence that does not
  // depend on the key reaches it about 1 time in 100.
  const SHADE_P = 0.01;

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    for (const child of children) node.append(child);
    return node;
  }

  function svg(tag, attrs = {}, ...children) {
    const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
    for (const child of children) node.append(child);
    return node;
  }

  function fmtP(p) {
    if (typeof p !== "number") return String(p);
    return p >= 0.001 ? String(Number(p.toPrecision(2))) : p.toExponential(1);
  }

  // a sentence's own p-value: both layers joined for a layered mark
  function sentenceP(result, i) {
    return result.sentence_layers ? result.sentence_layers[i].p_combined : result.sentence_p_values[i];
  }

  // ---- the charts: drawn at their box's own width, again when the window resizes ----
  function logAxis(maxEvidence) {
    const ymax = Math.max(3, Math.ceil(maxEvidence));
    const step = ymax <= 6 ? 1 : ymax <= 12 ? 2 : ymax <= 30 ? 5 : 10;
    const ticks = [];
    for (let t = 0; t <= ymax; t += step) ticks.push(t);
    return { ymax, ticks };
  }

  function tickLabel(t) {
    return t === 0 ? "1" : t < 4 ? String(10 ** -t) : `1e-${t}`;
  }

  const evidenceOf = (p) => -Math.log10(Math.max(p, 1e-300));

  function frame(width, height, ticks, ymax, label) {
    const left = 46;
    const right = 10;
    const top = 24;
    const bottom = 34;
    const y = (v) => top + (height - top - bottom) * (1 - Math.min(v, ymax) / ymax);
    const figure = svg("svg", { class: "plot", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": label });
    for (const t of ticks) {
      figure.append(svg("line", { class: "grid", x1: left, x2: width - right, y1: y(t), y2: y(t) }));
      figure.append(svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end" }, tickLabel(t)));
    }
    figure.append(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: y(0) }));
    figure.append(svg("line", { class: "axis", x1: left, x2: width - right, y1: y(0), y2: y(0) }));
    figure.append(svg("text", { class: "axis-title", x: 2, y: 12 }, "p-value (log scale: higher, stronger evidence)"));
    return { figure, y, left, right, top, bottom, height, width };
  }

  // a dashed level across the plot; its words are in the chart's legend (chartLegend),
  // so no label ever sits on a line or a bar
  function levelLine(f, p, cls, words) {
    const v = evidenceOf(p);
    const line = svg("line", { class: cls, x1: f.left, x2: f.width - f.right, y1: f.y(v), y2: f.y(v) });
    line.append(svg("title", {}, words));
    f.figure.append(line);
  }

  // the p-value as sentences are added: the text's (both layers joined) and each layer's
  function trailChart(result, width) {
    const trail = result.evidence_trail;
    const n = result.sentences.length;
    const layered = "p_semantic" in trail[0] && !result.ring_keys;
    const series = [["combined", (pt) => pt.p_value]];
    if (layered) series.push(["semantic", (pt) => pt.p_semantic], ["token", (pt) => pt.p_token]);
    const top = Math.max(...series.flatMap(([, get]) => trail.map((pt) => evidenceOf(get(pt)))));
    const { ymax, ticks } = logAxis(Math.max(top, evidenceOf(result.alpha) + 0.5));
    const crossing = trail.find((pt) => pt.p_value < result.alpha);
    const label = crossing
      ? `The p-value as sentences are added: below ${result.alpha} from sentence ${crossing.sentences} on, ${fmtP(trail.at(-1).p_value)} with all ${n}`
      : `The p-value as sentences are added: never below ${result.alpha}; ${fmtP(trail.at(-1).p_value)} with all ${n}`;
    const f = frame(width, 200, ticks, ymax, label);
    const x = (k) => f.left + 12 + (f.width - f.left - f.right - 24) * (n === 1 ? 0.5 : (k - 1) / (n - 1));
    levelLine(f, result.alpha, "alpha-line", `decision level ${result.alpha}`);
    for (const [name, get] of series.slice().reverse()) {
      const points = trail.map((pt) => `${x(pt.sentences).toFixed(1)},${f.y(evidenceOf(get(pt))).toFixed(1)}`);
      f.figure.append(svg("polyline", { class: `line series-${name}`, points: points.join(" ") }));
      if (name === "combined") {
        for (const pt of trail) {
          const dot = svg("circle", { class: `dot series-${name}`, cx: x(pt.sentences), cy: f.y(evidenceOf(pt.p_value)), r: 3.5 });
          let said = `First ${pt.sentences} sentence${pt.sentences === 1 ? "" : "s"}: p = ${fmtP(pt.p_value)}`;
          if (layered) said += ` (semantic ${fmtP(pt.p_semantic)}, token ${fmtP(pt.p_token)})`;
          dot.append(svg("title", {}, said));
          f.figure.append(dot);
        }
      }
    }
    xLabels(f, n, x, "sentences read");
    return f.figure;
  }

  function xLabels(f, n, x, title) {
    const every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor((f.width - f.left) / 28))));
    for (let k = 1; k <= n; k++) {
      if ((k - 1) % every === 0 || k === n) {
        f.figure.append(svg("text", { x: x(k), y: f.height - f.bottom + 14, "text-anchor": "middle" }, String(k)));
      }
    }
    f.figure.append(svg("text", { class: "axis-title", x: (f.left + f.width) / 2, y: f.height - 4, "text-anchor": "middle" }, title));
  }

  // each sentence's own evidence, one bar a layer
  function partsChart(result, width) {
    const n = result.sentences.length;
    const layers = result.sentence_layers;
    const bars = layers
      ? [["semantic", (i) => layers[i].p_semantic], ["token", (i) => layers[i].p_token]]
      : [["semantic", (i) => result.sentence_p_values[i]]];
    const top = Math.max(...bars.flatMap(([, get]) => result.sentences.map((_, i) => evidenceOf(get(i)))));
    const { ymax, ticks } = logAxis(Math.max(top, evidenceOf(SHADE_P) + 0.5));
    const shaded = result.sentences.filter((_, i) => sentenceP(result, i) < SHADE_P).length;
    const f = frame(width, 180, ticks, ymax,
      `Each sentence's own evidence: ${shaded} of ${n} sentences below p = ${SHADE_P} on their own`);
    const slot = (f.width - f.left - f.right) / n;
    const x = (k) => f.left + slot * (k - 0.5);
    const barWidth = Math.max(2, Math.min(22, (slot * 0.8) / bars.length));
    for (let i = 0; i < n; i++) {
      bars.forEach(([name, get], b) => {
        const p = get(i);
        const v = evidenceOf(p);
        const rect = svg("rect", {
          class: `bar series-${name}`,
          x: x(i + 1) - (barWidth * bars.length) / 2 + b * barWidth,
          y: f.y(v),
          width: Math.max(1, barWidth - 1),
          height: Math.max(0, f.y(0) - f.y(v)),
        });
        rect.append(svg("title", {}, `Sentence ${i + 1}, ${name} layer: p = ${fmtP(p)}`));
        f.figure.append(rect);
      });
    }
    levelLine(f, SHADE_P, "shade-line", `shading: p below ${SHADE_P}`);
    xLabels(f, n, x, "sentence");
    return f.figure;
  }

  function chartLegend(names, alpha) {
    const words = {
      combined: "the text's p-value (both layers)",
      semantic: "semantic layer",
      token: "token layer",
      "alpha-line": `decision level ${alpha}`,
      "shade-line": `shading: p below ${SHADE_P}`,
    };
    const list = el("ul", { class: "legend" });
    for (const name of names) {
      list.append(el("li", {}, el("span", { class: `key series-${name}`, "aria-hidden": "true" }), words[name]));
    }
    return list;
  }

  return { SHADE_P, el, svg, fmtP, sentenceP, trailChart, partsChart, chartLegend };
})();
