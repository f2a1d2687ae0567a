// samark's detection page: reads a pasted text or a .txt / .jsonl file, sends it to this
// server's POST /v1/detect with the caller's own token, and shows the answer. No library,
// nothing fetched from anywhere but this server; user text is only ever set as text.
"use strict";

(() => {
  const { SHADE_P, el, fmtP, sentenceP, trailChart, partsChart, chartLegend } = window.samarkDrawing;
  const { controlCharacter, binaryText, readText, parseJsonl } = window.samarkReading;
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

  const PROVENANCE = {
    served: "served verbatim",
    paraphrase: "close paraphrase of a served sentence",
    not_served: "not served",
  };
  // the page's token from `samark page`, kept for this tab (sessionStorage: gone when the
  // tab closes, never in the address after the first load, never sent anywhere but here)
  const TOKEN_KEY = "samark-page-token";

  let fileRecords = null; // {name, texts} of a .jsonl file: checked instead of the text box
  let lastReport = null;

  // `samark page` opens the page with its one-time token in the URL's fragment, which
  // browsers never send to a server; it is moved into the field and out of the address,
  // and kept in this tab's sessionStorage so that a reload keeps it.
  function keep(token) {
    try {
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // storage refused (a private window's setting): the token lasts until a reload
    }
  }
  function kept() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch {
      return "";
    }
  }
  const fragment = new URLSearchParams(location.hash.slice(1));
  if (fragment.get("token")) {
    keep(fragment.get("token"));
    history.replaceState(null, "", location.pathname + location.search);
  }
  if (kept()) {
    tokenBox.value = kept();
    $("token-help").textContent =
      "This page's own token, from samark page: kept in this tab until you close it, " +
      "and sent to this server only.";
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

  fileInput.addEventListener("change", async () => {
    clearError();
    fileRecords = null;
    fileNote.hidden = true;
    const file = fileInput.files[0];
    if (!file) return;
    try {
      const text = await readText(file, limits);
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
    if (status === 401 && kept() && tokenBox.value.trim() === kept()) {
      keep(""); // samark page makes a new token each run: this one is from an earlier run
      return "This page's token is no longer valid (samark page makes a new one each time it starts): open the address it printed.";
    }
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
      const which = texts.length > 1 ? `Text ${long + 1}: ` : "";
      throw new Error(
        `Not checked: ${which}a text of ${texts[long].length} characters; at most ${limits.max_text_chars}. Split it, or check part of it.`,
      );
    }
    const binary = texts.findIndex((t) => controlCharacter(t));
    if (binary >= 0) {
      const origin = texts.length > 1 ? `text ${binary + 1}` : "the text";
      throw new Error(`Not checked: ${binaryText(origin, controlCharacter(texts[binary]))}.`);
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
  // "about once in 70 million": how rarely a text without the mark scores as high
  function rarity(p) {
    if (p >= 0.01) return `${Math.round(p * 100)} times in 100`;
    const n = Number((1 / p).toPrecision(2));
    const words = [[1e12, "trillion"], [1e9, "billion"], [1e6, "million"]];
    for (const [size, word] of words) {
      if (n >= size) return `about once in ${Number((n / size).toPrecision(2))} ${word}`;
    }
    return `about once in ${n.toLocaleString("en")}`;
  }

  function verdictNote(result) {
    if (!("p_value" in result)) return null;
    const p = fmtP(result.p_value);
    const family = result.ring_keys ? " (counting every key of the keyring)" : "";
    const odds = rarity(result.p_value);
    return result.is_watermarked
      ? `p = ${p}: a text without the mark scores this high ${odds}${family}; the decision needs p below ${result.alpha}.`
      : `p = ${p}: a text without the mark scores this high ${odds}${family}; the decision needs p below ${result.alpha}, so nothing here shows the mark.`;
  }

  // the one verdict (the server's, samark.verdict): the mark and the record as one story,
  // its headline, its conclusion and its reasons
  function oneVerdict(v) {
    const box = el("div", { class: `one-verdict tone-${v.tone}`, "data-verdict": v.code,
      "data-mark": v.mark, "data-record": v.record });
    box.append(el("p", { class: `verdict tone-${v.tone}` }, v.headline));
    box.append(el("p", { class: "verdict-conclusion" }, v.conclusion));
    const reasons = el("ul", { class: "verdict-reasons" });
    for (const reason of v.reasons) reasons.append(el("li", {}, reason));
    box.append(reasons);
    return box;
  }

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
    const last = (result.evidence_trail || []).at(-1);
    if (last && "p_semantic" in last && !result.ring_keys) {
      add("Its two layers", `semantic p = ${fmtP(last.p_semantic)} · token p = ${fmtP(last.p_token)}`);
    }
    add("Significance level", String(result.alpha));
    if (result.key_id && (result.is_watermarked || !result.ring_keys)) {
      add("Key", result.key_label ? `${result.key_label} (id ${result.key_id})` : `id ${result.key_id}`);
    } else if (result.ring_keys) {
      add("Key", "none of the keyring's keys");
    }
    if (result.payload !== undefined && result.payload !== null) add("Payload", String(result.payload));
    add("Length", `${result.n_units} ${result.unit}${result.n_units === 1 ? "" : "s"}`);
    if (result.short_text) dl.append(el("dt", {}, "Short text"), el("dd", { class: "short-text" }, result.short_text));
    add("Scheme", String(result.scheme));
    if (result.manifest) add("C2PA manifest", manifestWords(result.manifest));
    return dl;
  }

  // how far the record sees a served sentence through a light edit (measured shares,
  // samark.provenance.threshold.EDITED_FOUND): "not served" does not rule one out
  function editedBand(prov) {
    const f = prov.edited_found;
    const kinds = ["word-s-5", "word-s-15", "word-d-5", "word-d-15"];
    if (!f || !kinds.every((k) => typeof f[k] === "number")) return null;
    const pct = (k) => `${Math.round(f[k] * 100)}%`;
    return el("p", { class: "note edited-band" },
      `A light edit can hide a served sentence. At this record's threshold (cosine ${prov.threshold}) ` +
      `it still finds ${pct("word-s-5")} of the served sentences changed when 5% of a text's words ` +
      `are replaced (${pct("word-s-15")} at 15%), and ${pct("word-d-5")} when 5% are dropped ` +
      `(${pct("word-d-15")} at 15%), as measured on real edits; the others read "not served".`);
  }

  // the text's C2PA manifest (samark.provenance.c2pa_manifest's four states), who signed it
  function manifestWords(m) {
    const by = m.signer ? ` by ${m.signer}${m.issuer ? ` (${m.issuer})` : ""}` : "";
    if (m.state === "intact") return `intact, signed${by}: the text is exactly what was signed`;
    if (m.state === "altered") return `signed${by}, but the text was edited after signing`;
    if (m.state === "unverifiable") return `present${m.signer ? `, signed${by},` : ""} but unverifiable: ${m.detail}`;
    return "none (never attached, or stripped)";
  }

  function when(time) {
    return String(time).replace("T", " ").replace("Z", " UTC");
  }

  // "1, 3-5, 8" from sorted 1-based numbers
  function ranges(numbers) {
    const out = [];
    for (let i = 0; i < numbers.length; i++) {
      let j = i;
      while (j + 1 < numbers.length && numbers[j + 1] === numbers[j] + 1) j++;
      out.push(j > i ? `${numbers[i]}–${numbers[j]}` : String(numbers[i]));
      i = j;
    }
    return out.join(", ");
  }

  // the requests the record found, folded away: one line a request, not one a sentence
  function requestList(prov) {
    const byRequest = new Map();
    for (const entry of prov.sentences) {
      if (!entry.match) continue;
      const id = entry.match.request_id;
      if (!byRequest.has(id)) byRequest.set(id, { time: entry.match.time, served: [], paraphrase: [] });
      const seen = byRequest.get(id);
      (entry.state === "paraphrase" ? seen.paraphrase : seen.served).push(entry.index + 1);
    }
    if (!byRequest.size) return null;
    const list = el("ul", {});
    for (const [id, seen] of byRequest) {
      const parts = [];
      if (seen.served.length) parts.push(`sentence${seen.served.length === 1 ? "" : "s"} ${ranges(seen.served)} verbatim`);
      if (seen.paraphrase.length) parts.push(`sentence${seen.paraphrase.length === 1 ? "" : "s"} ${ranges(seen.paraphrase)} as a close paraphrase`);
      list.append(el("li", {}, el("code", {}, id), ` (${when(seen.time)}): ${parts.join("; ")}`));
    }
    const n = byRequest.size;
    return el("details", { class: "requests" },
      el("summary", {}, `Which served request${n === 1 ? "" : "s"} the record found (${n})`), list);
  }

  function drawCharts(root = reports) {
    for (const box of root.querySelectorAll(".chart-box")) {
      const result = box.result;
      const width = Math.max(240, Math.floor(box.clientWidth));
      box.replaceChildren(box.dataset.chart === "trail" ? trailChart(result, width) : partsChart(result, width));
    }
  }

  let resizing = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizing);
    resizing = setTimeout(() => drawCharts(), 120);
  });

  function chartBox(kind, result) {
    const box = el("div", { class: "chart-box", "data-chart": kind });
    box.result = result;
    return box;
  }

  function sentenceList(result) {
    const prov = result.provenance ? result.provenance.sentences : [];
    const list = el("ol", { class: "sentences" });
    result.sentences.forEach((sentence, i) => {
      const p = sentenceP(result, i);
      const shaded = p < SHADE_P;
      const meta = el("span", { class: "meta" });
      const entry = prov.find((s) => s.index === i);
      if (entry) {
        let said = PROVENANCE[entry.state] || entry.state;
        if (entry.state === "served" && entry.times_served > 1) said += ` (${entry.times_served} times)`;
        if (entry.state === "paraphrase" && entry.cosine !== undefined) said += ` (cosine ${entry.cosine})`;
        meta.append(el("span", { class: `badge pv-${entry.state}` }, said), " ");
      }
      let evidence = `p = ${fmtP(p)}`;
      if (result.sentence_layers) {
        const layer = result.sentence_layers[i];
        evidence += ` (semantic ${fmtP(layer.p_semantic)}; token ${fmtP(layer.p_token)}: ` +
          `${layer.tokens_green} of ${layer.tokens_scored} green)`;
      }
      meta.append(shaded ? `${evidence}: carries the mark on its own` : evidence);
      list.append(el("li", { class: shaded ? "ev-mark" : "ev-none", "data-evidence": shaded ? "mark" : "none", "data-state": entry ? entry.state : "" },
        el("span", { class: "said" }, sentence), meta));
    });
    return list;
  }

  function sentenceLegend(withProvenance) {
    const list = el("ul", { class: "legend", "aria-label": "Legend" });
    list.append(el("li", {}, el("span", { class: "swatch ev-mark", "aria-hidden": "true" }),
      `shaded: this sentence alone has p below ${SHADE_P} (a sentence without the mark: about 1 in 100)`));
    list.append(el("li", {}, el("span", { class: "swatch ev-none", "aria-hidden": "true" }),
      "unshaded: not enough evidence in the sentence alone"));
    if (withProvenance) {
      for (const [state, label] of Object.entries(PROVENANCE)) {
        list.append(el("li", {}, el("span", { class: `badge pv-${state}` }, label)));
      }
    }
    return list;
  }

  function reportCard(result, i, n, detailsRefused) {
    const card = el("article", { class: "report" });
    if (n > 1) card.append(el("h3", {}, `Record ${i + 1} of ${n}`));
    if (result.error) {
      card.append(el("p", { class: "error" }, `Not checked: ${result.error}`));
      return card;
    }
    if (result.verdict) {
      card.append(oneVerdict(result.verdict));
    } else {
      // a decision-only answer: the mark's decision, nothing more
      const marked = Boolean(result.is_watermarked);
      card.append(el("p", { class: `verdict ${marked ? "tone-good" : "tone-neutral"}` },
        marked ? "Marked: this text carries the watermark" : "Not marked: the watermark was not found"));
      const note = verdictNote(result);
      if (note) card.append(el("p", { class: "verdict-note" }, note));
    }
    card.append(facts(result));
    if (!("p_value" in result)) {
      card.append(el("p", { class: "note" },
        "Your token is answered with the decision only: no p-value and no sentence evidence " +
        "(the operator's setting, which keeps forgers from learning how close they are)."));
    } else if (detailsRefused) {
      card.append(el("p", { class: "note" },
        "Which sentences carry the mark is shown to admin tokens only."));
    }
    const sentences = Array.isArray(result.sentences) ? result.sentences : [];
    if (sentences.length && sentences.length === (result.sentence_p_values || []).length) {
      const layered = Boolean(result.sentence_layers);
      if (Array.isArray(result.evidence_trail) && result.evidence_trail.length) {
        const trail = result.evidence_trail;
        const crossing = trail.find((pt) => pt.p_value < result.alpha);
        const section = el("section", { class: "trail", "data-points": String(trail.length) });
        section.append(el("h4", {}, "How the evidence adds up"));
        section.append(el("p", { class: "note trail-summary" }, crossing
          ? `The p-value of the first sentences, as more are read: below the decision level ${result.alpha} from sentence ${crossing.sentences} on, and ${fmtP(trail.at(-1).p_value)} with all ${sentences.length}. Higher on the chart: a smaller p-value, stronger evidence.`
          : `The p-value of the first sentences, as more are read: it never falls below the decision level ${result.alpha} (${fmtP(trail.at(-1).p_value)} with all ${sentences.length}). Higher on the chart: a smaller p-value, stronger evidence.`));
        section.append(chartLegend([...(layered && !result.ring_keys ? ["combined", "semantic", "token"] : ["combined"]), "alpha-line"], result.alpha));
        section.append(chartBox("trail", result));
        card.append(section);
      }
      const parts = el("section", { class: "parts" });
      parts.append(el("h4", {}, layered ? "Each sentence's part, layer by layer" : "Each sentence's part"));
      parts.append(el("p", { class: "note" }, layered
        ? "Each sentence scored on its own, one bar a layer: the semantic layer (what the sentence says) and the token layer (its words). One sentence alone is weak evidence; a marked text's comes from many."
        : "Each sentence scored on its own. One sentence alone is weak evidence; a marked text's comes from many."));
      parts.append(chartLegend([...(layered ? ["semantic", "token"] : ["semantic"]), "shade-line"], result.alpha));
      parts.append(chartBox("parts", result));
      card.append(parts);
      const listing = el("section", { class: "listing" });
      listing.append(el("h4", {}, "The sentences"));
      listing.append(sentenceLegend(Boolean(result.provenance)));
      listing.append(sentenceList(result));
      if (result.provenance) {
        const requests = requestList(result.provenance);
        if (requests) listing.append(requests);
        const band = editedBand(result.provenance);
        if (band) listing.append(band);
      }
      card.append(listing);
    }
    return card;
  }

  function render(answer, source) {
    const n = answer.results.length;
    if (n === 1 && answer.results[0].error && !fileRecords) {
      throw new Error(`Not checked: ${answer.results[0].error}`);
    }
    results.hidden = false;
    reports.replaceChildren(...answer.results.map((r, i) => reportCard(r, i, n, answer.detailsRefused)));
    drawCharts();
    lastReport = { source, checked: new Date().toISOString(), results: answer.results };
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
