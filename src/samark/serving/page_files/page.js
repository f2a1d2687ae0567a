// samark's detection page: reads a pasted text or a .txt / .jsonl file, sends it to this
// server's POST /v1/detect with the caller's own token, and shows the answer. No library,
// nothing fetched from anywhere but this server; user text is only ever set as text.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const form = $("check");
  const textBox = $("text");
  const fileInput = $("file");
  const fileNote = $("file-note");
  const tokenBox = $("token");
  const submit = $("submit");
  const statusLine = $("status");
  const errorBox = $("error");
  const results = $("results");
  const reports = $("reports");

  // what one check may hold: the server's own limits (GET /healthz), until they arrive the
  // defaults of `samark serve`
  const limits = { max_body_bytes: 1000000, max_batch: 64, max_text_chars: 100000 };
  fetch("/healthz")
    .then((r) => (r.ok ? r.json() : null))
    .then((health) => {
      if (health && health.limits) Object.assign(limits, health.limits);
    })
    .catch(() => {});

  function megabytes(bytes) {
    return bytes >= 1000000 ? `${Number((bytes / 1000000).toPrecision(3))} MB` : `${Math.ceil(bytes / 1000)} kB`;
  }
  // per-sentence evidence, by the sentence's own p-value
  const LEVELS = [
    { name: "strong", below: 0.01, label: "strong evidence (p < 0.01)" },
    { name: "some", below: 0.05, label: "some evidence (p < 0.05)" },
    { name: "weak", below: 0.2, label: "weak evidence (p < 0.2)" },
    { name: "none", below: Infinity, label: "no evidence" },
  ];
  // the plot's dashed line
  const DASHED_P = 0.05;
  const PROVENANCE = {
    served: "served verbatim",
    paraphrase: "close paraphrase of a served sentence",
    not_served: "not served",
  };

  let fileRecords = null; // {name, texts} of a .jsonl file: checked instead of the text box
  let lastReport = null;

  // `samark page` opens the page with its one-time token in the URL's fragment, which
  // browsers never send to a server; it is moved into the field and out of the address.
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    tokenBox.value = fragment.get("token");
    history.replaceState(null, "", location.pathname + location.search);
  }

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

  function showError(message) {
    errorBox.textContent = message;
    errorBox.hidden = false;
    errorBox.focus();
  }

  function clearError() {
    errorBox.hidden = true;
    errorBox.textContent = "";
  }

  function fmtP(p) {
    if (typeof p !== "number") return String(p);
    return p >= 0.001 ? String(Number(p.toPrecision(2))) : p.toExponential(1);
  }

  function level(p) {
    return LEVELS.find((l) => p < l.below);
  }

  // ---- reading a file ----
  async function readText(file) {
    if (file.size === 0) throw new Error(`${file.name} is empty: there is no text to check.`);
    if (file.size > limits.max_body_bytes) {
      throw new Error(
        `${file.name} is ${megabytes(file.size)}; this server checks at most ${megabytes(limits.max_body_bytes)} at once. Split it, or check part of it.`,
      );
    }
    const bytes = new Uint8Array(await file.arrayBuffer());
    const notText = `${file.name} is not a text file (it holds binary data): choose a .txt or .jsonl file.`;
    if (bytes.includes(0)) throw new Error(notText);
    let text;
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new Error(notText);
    }
    if (!text.trim()) throw new Error(`${file.name} holds only blank space: there is no text to check.`);
    return text;
  }

  function parseJsonl(text, name) {
    const texts = [];
    text.split(/\r?\n/).forEach((line, i) => {
      if (!line.trim()) return;
      let record;
      try {
        record = JSON.parse(line);
      } catch {
        throw new Error(`${name}, line ${i + 1}: not a JSON record.`);
      }
      if (record === null || typeof record !== "object" || typeof record.text !== "string") {
        throw new Error(`${name}, line ${i + 1}: a record needs a "text" field holding the text.`);
      }
      texts.push(record.text);
    });
    if (!texts.length) throw new Error(`${name} holds no records: there is no text to check.`);
    return texts;
  }

  fileInput.addEventListener("change", async () => {
    clearError();
    fileRecords = null;
    fileNote.hidden = true;
    const file = fileInput.files[0];
    if (!file) return;
    try {
      const text = await readText(file);
      if (file.name.toLowerCase().endsWith(".jsonl")) {
        fileRecords = { name: file.name, texts: parseJsonl(text, file.name) };
        const n = fileRecords.texts.length;
        fileNote.textContent = `${n} record${n === 1 ? "" : "s"} read from ${file.name}; ` +
          "Check tests each one (the text box is not used).";
      } else {
        textBox.value = text;
        fileNote.textContent = `${file.name} is in the text box.`;
      }
      fileNote.hidden = false;
    } catch (err) {
      fileInput.value = "";
      showError(err.message);
    }
  });

  textBox.addEventListener("input", () => {
    if (!fileRecords) return;
    fileRecords = null; // typing means the text box is what to check
    fileInput.value = "";
    fileNote.hidden = true;
  });

  // ---- asking the server ----
  async function post(texts, token, details) {
    const headers = { "content-type": "application/json" };
    if (token) headers.authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch("/v1/detect", {
        method: "POST",
        headers,
        body: JSON.stringify({ texts, details }),
      });
    } catch {
      throw new Error("The server could not be reached. Is it still running?");
    }
    let body = null;
    try {
      body = await response.json();
    } catch {
      body = null;
    }
    return { status: response.status, body };
  }

  function explain(status, body) {
    const message = body && body.error && body.error.message;
    if (status === 401) {
      return `This server needs a valid API token (${message || "refused"}). Enter the token your operator gave you.`;
    }
    if (status === 429) return `Your detection budget is spent: ${message}`;
    return message ? `The server refused the check: ${message}` : `The server answered ${status}.`;
  }

  async function detect(texts, token) {
    if (texts.length > limits.max_batch) {
      throw new Error(`The file holds ${texts.length} texts; this server checks at most ${limits.max_batch} at once. Split it.`);
    }
    const long = texts.findIndex((t) => t.length > limits.max_text_chars);
    if (long >= 0) {
      throw new Error(
        `Text ${long + 1} has ${texts[long].length} characters; this server checks at most ${limits.max_text_chars} a text.`,
      );
    }
    let { status, body } = await post(texts, token, true);
    let detailsRefused = false;
    if (status === 403 && body && body.error && body.error.code === "admin") {
      detailsRefused = true; // sentence evidence is for admin tokens: ask for the rest
      ({ status, body } = await post(texts, token, false));
    }
    if (status !== 200) throw new Error(explain(status, body));
    return { results: body.data, detailsRefused };
  }

  // ---- showing the answer ----
  function facts(result) {
    const dl = el("dl", { class: "facts" });
    const add = (term, value) => dl.append(el("dt", {}, term), el("dd", {}, value));
    if ("p_value" in result) {
      if (result.ring_keys) {
        add("Family-wise p-value", `${fmtP(result.p_value)} (over the ${result.ring_keys} keys of the keyring)`);
      } else {
        add("p-value", fmtP(result.p_value));
      }
    }
    add("Significance level", String(result.alpha));
    if (result.key_id && (result.is_watermarked || !result.ring_keys)) {
      add("Key", result.key_label ? `${result.key_label} (id ${result.key_id})` : `id ${result.key_id}`);
    } else if (result.ring_keys) {
      add("Key", "none of the keyring's keys");
    }
    if (result.payload !== undefined && result.payload !== null) add("Payload", String(result.payload));
    add("Length", `${result.n_units} ${result.unit}${result.n_units === 1 ? "" : "s"}`);
    add("Scheme", String(result.scheme));
    if (result.provenance) add("Served record", provenanceSummary(result.provenance));
    return dl;
  }

  function provenanceSummary(prov) {
    const n = prov.sentences.length;
    return `${prov.served} of ${n} sentence${n === 1 ? "" : "s"} served verbatim, ` +
      `${prov.paraphrase} a close paraphrase of a served sentence, ${prov.not_served} not served`;
  }

  function provenanceText(entry) {
    let said = PROVENANCE[entry.state] || entry.state;
    if (entry.state === "served" && entry.times_served > 1) said += ` ${entry.times_served} times`;
    if (entry.match) {
      const how = entry.state === "paraphrase" ? `, cosine ${entry.cosine}` : "";
      const when = String(entry.match.time).replace("T", " ").replace("Z", " UTC");
      said += ` (request ${entry.match.request_id}, ${when}${how})`;
    }
    return said;
  }

  function legend(withProvenance) {
    const list = el("ul", { class: "legend", "aria-label": "Legend" });
    for (const l of LEVELS) {
      list.append(el("li", {}, el("span", { class: `swatch ev-${l.name}`, "aria-hidden": "true" }), l.label));
    }
    if (withProvenance) {
      for (const [state, label] of Object.entries(PROVENANCE)) {
        list.append(el("li", {}, el("span", { class: `swatch prov-${state}`, "aria-hidden": "true" }), label));
      }
    }
    return list;
  }

  function plot(pValues) {
    const n = pValues.length;
    // drawn at about the size it is shown (a phone's width, or 600 px), so that its text
    // stays readable rather than scaled down
    const width = Math.max(280, Math.min(600, document.documentElement.clientWidth - 72));
    const height = 160;
    const left = 44;
    const bottom = 20;
    const top = 10;
    const evidence = pValues.map((p) => -Math.log10(Math.max(p, 1e-12)));
    const ymax = Math.max(3, Math.ceil(Math.max(...evidence)));
    const y = (v) => top + (height - top - bottom) * (1 - v / ymax);
    const slot = (width - left - 8) / n;
    const strong = pValues.filter((p) => p < DASHED_P).length;
    const figure = svg("svg", {
      class: "plot",
      viewBox: `0 0 ${width} ${height}`,
      role: "img",
      "aria-label": `Evidence per sentence: ${strong} of ${n} sentences have p below ${DASHED_P}`,
    });
    figure.append(svg("title", {}, "Evidence per sentence (taller: stronger)"));
    for (let t = 0; t <= ymax; t++) {
      figure.append(svg("line", { class: "axis", x1: left - 4, x2: left, y1: y(t), y2: y(t) }));
      figure.append(svg("text", { x: left - 6, y: y(t) + 4, "text-anchor": "end" }, t < 4 ? String(10 ** -t) : `1e-${t}`));
    }
    figure.append(svg("line", { class: "axis", x1: left, x2: left, y1: top, y2: y(0) }));
    figure.append(svg("line", { class: "axis", x1: left, x2: width - 8, y1: y(0), y2: y(0) }));
    const every = Math.ceil(n / 20);
    evidence.forEach((v, i) => {
      const x = left + i * slot + slot * 0.15;
      const bar = svg("rect", {
        class: `bar-${level(pValues[i]).name}`,
        x,
        y: y(v),
        width: Math.max(1, slot * 0.7),
        height: Math.max(0, y(0) - y(v)),
      });
      bar.append(svg("title", {}, `Sentence ${i + 1}: p = ${fmtP(pValues[i])}`));
      figure.append(bar);
      if (i % every === 0) {
        figure.append(svg("text", { x: x + slot * 0.35, y: height - bottom + 14, "text-anchor": "middle" }, String(i + 1)));
      }
    });
    const line = -Math.log10(DASHED_P);
    figure.append(svg("line", { class: "alpha-line", x1: left, x2: width - 8, y1: y(line), y2: y(line) }));
    return figure;
  }

  function sentenceList(result) {
    const prov = result.provenance ? result.provenance.sentences : [];
    const list = el("ol", { class: "sentences" });
    result.sentences.forEach((sentence, i) => {
      const p = result.sentence_p_values[i];
      const lv = level(p);
      const meta = [`p = ${fmtP(p)}`, lv.label];
      const entry = prov.find((s) => s.index === i);
      const classes = [`ev-${lv.name}`];
      if (entry) {
        meta.push(provenanceText(entry));
        classes.push(`prov-${entry.state}`);
      }
      list.append(el("li", { class: classes.join(" "), "data-evidence": lv.name, "data-state": entry ? entry.state : "" },
        el("span", { class: "said" }, sentence),
        el("span", { class: "meta" }, meta.join(" · "))));
    });
    return list;
  }

  function reportCard(result, i, n, detailsRefused) {
    const card = el("article", { class: "report" });
    if (n > 1) card.append(el("h3", {}, `Record ${i + 1} of ${n}`));
    if (result.error) {
      card.append(el("p", { class: "error" }, `Not checked: ${result.error}`));
      return card;
    }
    const marked = Boolean(result.is_watermarked);
    card.append(el("p", { class: `verdict ${marked ? "marked" : "clear"}` },
      marked ? "Marked: this text carries the watermark" : "Not marked: the watermark was not found"));
    card.append(facts(result));
    if (!("p_value" in result)) {
      card.append(el("p", { class: "note" },
        "Your token is answered with the decision only: no p-value and no sentence evidence " +
        "(the operator's setting, which keeps forgers from learning how close they are)."));
    } else if (detailsRefused) {
      card.append(el("p", { class: "note" },
        "Which sentences carry the mark is shown to admin tokens only."));
    }
    if (Array.isArray(result.sentences) && result.sentences.length === (result.sentence_p_values || []).length && result.sentences.length) {
      card.append(el("h4", {}, "Evidence per sentence"));
      card.append(plot(result.sentence_p_values));
      card.append(el("p", { class: "note" },
        `Each bar is a sentence, numbered as below: the taller, the smaller its p-value ` +
        `(log scale); dashed line: p = ${DASHED_P}.`));
      card.append(legend(Boolean(result.provenance)));
      card.append(sentenceList(result));
    }
    return card;
  }

  function render(answer, source) {
    const n = answer.results.length;
    if (n === 1 && answer.results[0].error && !fileRecords) {
      throw new Error(`Not checked: ${answer.results[0].error}`);
    }
    reports.replaceChildren(...answer.results.map((r, i) => reportCard(r, i, n, answer.detailsRefused)));
    lastReport = { source, checked: new Date().toISOString(), results: answer.results };
    results.hidden = false;
    $("results-title").textContent = n === 1 ? "Result" : `Results (${n} records)`;
    $("results-title").focus();
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearError();
    results.hidden = true;
    const texts = fileRecords ? fileRecords.texts : [textBox.value];
    if (!fileRecords && !textBox.value.trim()) {
      showError("There is nothing to check: paste a text or choose a file first.");
      return;
    }
    submit.disabled = true;
    statusLine.textContent = "Checking…";
    try {
      const answer = await detect(texts, tokenBox.value.trim());
      render(answer, fileRecords ? fileRecords.name : "pasted text");
      statusLine.textContent = "Checked.";
    } catch (err) {
      statusLine.textContent = "";
      showError(err.message);
    } finally {
      submit.disabled = false;
    }
  });

  $("download").addEventListener("click", () => {
    if (!lastReport) return;
    const blob = new Blob([JSON.stringify(lastReport, null, 2)], { type: "application/json" });
    const link = el("a", { href: URL.createObjectURL(blob), download: "samark-report.json" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 1000);
  });
})();
