// samark's detection page, its reading: what a text must be (samark.intake's rules and
// words, as the CLI and the server say them) and a chosen .txt or .jsonl file read into
// texts. Loaded before page.js, which takes them from window.samarkReading.
"use strict";

window.samarkReading = (() => {
  function megabytes(bytes) {
    return bytes >= 1000000 ? `${Number((bytes / 1000000).toPrecision(3))} MB` : `${Math.ceil(bytes / 1000)} kB`;
  }

  // ---- what a text must be: samark.intake's rules and words, as the CLI and server say them ----
  // a control character no text holds (not a tab, line break, carriage return, form feed
  // or vertical tab), or null
  function controlCharacter(text) {
    const found = text.match(/[\u0000-\u0008\u000e-\u001f\u007f]/);
    return found ? found[0] : null;
  }

  function binaryText(origin, ch) {
    const code = ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0");
    return `${origin} is binary, not text (it holds the control character U+${code})`;
  }

  // ---- reading a file ----
  async function readText(file, limits) {
    if (file.size === 0) throw new Error(`${file.name} is empty: there is no text to check.`);
    if (file.size > limits.max_body_bytes) {
      throw new Error(
        `${file.name} is ${megabytes(file.size)}; this server checks at most ${megabytes(limits.max_body_bytes)} at once. Split it, or check part of it.`,
      );
    }
    const bytes = new Uint8Array(await file.arrayBuffer());
    const choose = "choose a .txt or .jsonl file.";
    let text;
    if (bytes.includes(0)) throw new Error(`${binaryText(file.name, "\u0000")}: ${choose}`);
    try {
      text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    } catch {
      throw new Error(`${file.name} is not UTF-8 text: ${choose}`);
    }
    const control = controlCharacter(text);
    if (control) throw new Error(`${binaryText(file.name, control)}: ${choose}`);
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

  return { controlCharacter, binaryText, readText, parseJsonl };
})();
