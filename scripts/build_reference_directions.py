"""Build ``src/samark/resources/reference_directions.json``: public directions that pivots avoid.

Sentence embeddings are anisotropic, and each domain of human text has its own mean
direction. A pivot that happens to lean towards a domain's mean biases every text of that
domain, so that key's false-positive rate on it drifts from the nominal one (measured: up to
15% at alpha = 1% on news with unconstrained pivots, see docs/statistics.md). Keys and
the detector's null pivots are therefore drawn orthogonal to these directions (same law for
both, so the p-value stays exact).

Directions, one per domain: the mean embedding of news prose ("news": CNN/DailyMail
sentences 11-25, so that tests on each article's first 10 sentences are out of sample), of
encyclopedic prose ("wiki": Wikipedia leads 5000 onwards; tests use leads before 5000) and
of fiction ("fiction", since 2026-11-24: sentences 11-25 of Jane Austen's chapters; tests use
the first 10). Directions already shipped are kept bit for bit (keys derive their pivots
from them): the script only adds new domains, and prints how far a recomputation of each
shipped one lands from it.

    python scripts/build_reference_directions.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from samark.datasets import load_dataset
from samark.embed import load_embedder
from samark.segment import split_sentences

OUT = (
    Path(__file__).resolve().parents[1]
    / "src"
    / "samark"
    / "resources"
    / "reference_directions.json"
)
WIKI_START = 5000


def main() -> None:
    news = [s for d in load_dataset("cnn_dailymail") for s in split_sentences(d.text)[10:25]]
    leads = load_dataset("wikipedia_leads")[WIKI_START : WIKI_START + 800]
    wiki = [s for d in leads for s in split_sentences(d.text)[:3]]
    chapters = [split_sentences(d.text) for d in load_dataset("jane_austen")]
    fiction = [s for c in chapters if len(c) >= 13 for s in c[10:25]]
    sources = {
        "news": (news, f"cnn_dailymail sentences 11-25 ({len(news)} sentences)"),
        "wiki": (
            wiki,
            f"wikipedia_leads {WIKI_START}-{WIKI_START + 799}, first 3 sentences ({len(wiki)})",
        ),
        "fiction": (fiction, f"jane_austen chapters, sentences 11-25 ({len(fiction)})"),
    }
    shipped = json.loads(OUT.read_text()) if OUT.exists() else {}
    table = {}
    for name in ("all-mpnet-base-v2", "all-minilm-l6-v2"):
        emb = load_embedder(name)
        old = shipped.get(name, {})
        if old and old["fingerprint"] != emb.identity.fingerprint:
            raise SystemExit(f"{name}: the embedder's files changed; keys would change too")
        old_domains = list(old.get("domains", ["news", "wiki"][: len(old.get("directions", []))]))
        entry: dict[str, list] = {"domains": [], "sources": [], "directions": []}
        for domain, (sentences, source) in sources.items():
            if domain in old_domains:  # shipped: keep it exactly
                i = old_domains.index(domain)
                direction = old["directions"][i]
                fresh = emb.encode(sentences).mean(axis=0)
                drift = float(np.abs(fresh - np.array(direction)).max())
                print(f"{name} {domain}: kept (recomputed differs by {drift:.1e})")
                source = old["sources"][i]
            else:
                direction = [float(x) for x in emb.encode(sentences).mean(axis=0)]
                print(f"{name} {domain}: new, norm {np.linalg.norm(direction):.4f}")
            entry["domains"].append(domain)
            entry["sources"].append(source)
            entry["directions"].append(direction)
        table[name] = {"fingerprint": emb.identity.fingerprint, **entry}
    OUT.write_text(json.dumps(table) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
