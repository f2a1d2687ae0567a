"""Mark designs replayed on recorded candidate pools (issue 44): static pivots (SAMark) and
pivots keyed by each sentence's own semantic cell, unattacked and attacked.

Each pool of ``candidate_pools.py`` is key-independent, so a design under a fresh key is
replayed offline: at step t its rule picks among pool t (its own history feeds the hard
filters and the diversity terms). Its text is then scored, unattacked and after each
``--attacks`` (the project's Doc-P (local), Doc-T and Mix 50% with the prompt's own human
continuation), by the design's statistic with an exact p-value: the rank of the key's value
among ``--nulls`` null keys drawn from the same law (the key is one draw of that law, so
under H0 -- a text that does not depend on the key -- the rank is uniform). Human texts
(each prompt's own continuation) give the FPR.

A design (``Design``): ``cells`` keyed anchors cut meaning space into Voronoi cells
(1: one cell, SAMark's static pivots), each cell with its own ``channels`` keyed
orthonormal pivots. A sentence is scored against its own cell's pivots. ``flags``:
"text" (SAMark: a random pattern per generation, majority-voted at detection) or "cell"
(a keyed pattern per cell, known at detection).

Why cells: with static pivots the mark is one offset along the key shared by every
sentence, and so is the text's topic: a random direction's projection of the text's mean
has spread |mean embedding| / sqrt(dim), which does not shrink with more sentences when
they say similar things. Pivots that change from sentence to sentence make the sentences'
null projections independent, so evidence adds up as sqrt(n). The price: a paraphrase that
moves a sentence to another cell loses that sentence's evidence.

    python benchmarks/studies/selection_replay.py experiments/runs/candidate-pools/pools.jsonl \\
        --keys 5 --lengths 3 6 --attacks none doc-p --out experiments/runs/candidate-pools/replay.jsonl

Screening only: the replayed pick's context is the plain trajectory's (candidate_pools.py).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from samark.schemes.samark.selection import ngram_overlap, semantic_similarity
from samark.schemes.samark.statistics import exchangeable_p_value, scan
from samark.text import ngrams, words

DIM = 768
KAPPA = 30.0


@dataclass(frozen=True)
class Design:
    name: str
    cells: int = 1
    channels: int = 2
    flags: str = "text"  # "text", "cell" or "sign"
    pick: str = "maxmin"  # "maxmin" or "softmax"
    statistic: str = "scan"  # "scan" or "mean"


@dataclass
class KeySet:
    """K keys of a design's law at once: anchors (K, M, d), pivots (K, M, c, d), cell flags
    (K, M, c)."""

    anchors: np.ndarray
    pivots: np.ndarray
    flags: np.ndarray

    @classmethod
    def draw(cls, design: Design, count: int, seed: int) -> KeySet:
        rng = np.random.default_rng(seed)
        m, c = design.cells, design.channels
        anchors = rng.standard_normal((count, m, DIM)).astype(np.float32)
        anchors /= np.linalg.norm(anchors, axis=2, keepdims=True)
        g = rng.standard_normal((count * m, DIM, c))
        q, _ = np.linalg.qr(g)  # (count*m, d, c) orthonormal columns
        pivots = np.transpose(q, (0, 2, 1)).reshape(count, m, c, DIM).astype(np.float32)
        flags = rng.choice(np.array([-1.0, 1.0], dtype=np.float32), size=(count, m, c))
        return cls(anchors, pivots, flags)

    def __getitem__(self, k: int) -> KeySet:
        return KeySet(self.anchors[k : k + 1], self.pivots[k : k + 1], self.flags[k : k + 1])

    def responses(self, emb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each sentence's cosines to its own cell's pivots under each key, (K, n, c), and
        its cell, (K, n)."""
        k, m, c, d = self.pivots.shape
        cells = (
            np.argmax(np.einsum("nd,kmd->knm", emb, self.anchors), axis=2)
            if m > 1
            else np.zeros((k, emb.shape[0]), dtype=int)
        )
        piv = self.pivots[np.arange(k)[:, None], cells]  # (K, n, c, d)
        return np.einsum("nd,kncd->knc", emb, piv), cells


def evidence(keys: KeySet, emb: np.ndarray, design: Design) -> np.ndarray:
    """tanh(kappa * flag-signed cosine), (K, n, c): flags majority-voted per text, or the
    cell's keyed flags."""
    resp, cells = keys.responses(emb)
    if design.flags in ("cell", "sign"):
        signs = keys.flags[np.arange(resp.shape[0])[:, None], cells]  # (K, n, c)
        if design.flags == "sign":  # one random sign a text: majority-voted over everything
            signs = signs * np.where((resp * signs).sum(axis=(1, 2), keepdims=True) >= 0, 1, -1)
    else:
        signs = np.where(resp.sum(axis=1, keepdims=True) >= 0, 1.0, -1.0)
    return np.tanh(KAPPA * resp * signs)


def statistic(ev: np.ndarray, design: Design) -> np.ndarray:
    return scan(ev) if design.statistic == "scan" else ev.reshape(ev.shape[0], -1).mean(axis=1)


def p_value(keys_and_nulls: KeySet, emb: np.ndarray, design: Design) -> float:
    values = statistic(evidence(keys_and_nulls, emb, design), design)
    return exchangeable_p_value(float(values[0]), values[1:])


def candidate_signed(key: KeySet, emb: np.ndarray, text_flags: np.ndarray, design: Design) -> np.ndarray:
    """Each candidate's flag-signed cosines to its own cell's pivots, (m, c)."""
    resp, cells = key.responses(emb)
    if design.flags == "text":
        signs = text_flags[None, :]
    else:  # the cell's keyed flags, times one random sign a text ("sign")
        signs = key.flags[0, cells[0]] * (text_flags[0] if design.flags == "sign" else 1.0)
    return resp[0] * signs


def replay(
    steps: list[dict[str, Any]],
    key: KeySet,
    design: Design,
    rng: np.random.Generator,
    sentences: int,
    candidates: int,
) -> tuple[list[str], np.ndarray, int]:
    """The design's text over the first ``sentences`` pools: (sentences, embeddings,
    matched count). The hard filters are SAMark's (4-gram overlap < 0.4 with the context,
    cosine < 0.8 to every chosen sentence)."""
    text_flags = rng.choice([-1.0, 1.0], size=design.channels)
    context = words(steps[0]["prompt"])
    context_ngrams = set(ngrams(context, 4))
    history = np.zeros((0, DIM), dtype=np.float32)
    chosen: list[str] = []
    matched = 0
    for s in steps[:sentences]:
        texts = s["candidates"][:candidates]
        emb = s["embeddings"][:candidates]
        ok = np.array([ngram_overlap(t, context_ngrams, 4) < 0.4 for t in texts])
        rho = semantic_similarity(emb, history)
        ok &= rho < 0.8
        signed = candidate_signed(key, emb, text_flags, design)
        pool = np.flatnonzero(ok) if ok.any() else np.arange(len(texts))
        hit = pool[np.all(signed[pool] > 0, axis=1)]
        if design.pick == "maxmin":
            index = int(pool[np.argmax(signed[pool].min(axis=1))])
        else:  # the paper's softmax over matched candidates (epsilon 10, lambda_div 0.35)
            among = hit if hit.size else pool
            score = np.tanh(KAPPA * signed[among]).sum(axis=1) + 0.35 * (1 - rho[among])
            q = np.exp(10 * (score - score.max()))
            index = int(rng.choice(among, p=q / q.sum()))
        matched += bool(np.all(signed[index] > 0))
        chosen.append(texts[index])
        history = np.vstack([history, emb[index]])
        new = words(texts[index])
        context.extend(new)
        context_ngrams.update(ngrams(context[-(len(new) + 3) :], 4))
    return chosen, history, matched


DESIGNS = {
    d.name: d
    for d in (
        Design("static c2 (SAMark)", pick="softmax"),
        Design("static c2 sign", flags="sign"),
        Design("static c2 maxmin"),
        Design("static c4 maxmin", channels=4),
        Design("cells4 c2 text-flags", cells=4),
        Design("cells16 c2 text-flags", cells=16),
        Design("cells4 c2 cell-flags", cells=4, flags="cell"),
        Design("cells16 c2 cell-flags", cells=16, flags="cell"),
        Design("cells64 c2 cell-flags", cells=64, flags="cell"),
        Design("cells16 c1 cell-flags", cells=16, channels=1, flags="cell"),
        Design("cells16 c2 sign", cells=16, flags="sign"),
        Design("cells16 c1 sign", cells=16, channels=1, flags="sign"),
        Design("cells64 c2 sign", cells=64, flags="sign"),
        Design("cells16 c2 text-flags paper-pick", cells=16, pick="softmax"),
        Design("cells16 c2 sign paper-pick", cells=16, flags="sign", pick="softmax"),
        Design("cells16 c4 cell-flags", cells=16, channels=4, flags="cell"),
    )
}


class Attacks:
    """The attacks of the paper protocol that run locally in seconds: Doc-P (local),
    Doc-T (Portuguese round trip, sentence-wise), Mix 50% with the prompt's own human text."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._docp: Any = None
        self._trip: Any = None

    def __call__(self, name: str, text: str, human: str, seed: int) -> str:
        if name == "doc-p":
            if self._docp is None:
                from samark.evaluation.attacks.local_paraphrase import LocalParaphrase

                self._docp = LocalParaphrase()
            return str(self._docp.apply_one(text, random.Random(seed), None))
        if name == "doc-t":
            if self._trip is None:
                from samark.evaluation.attacks.translation import PortugueseRoundTrip

                self._trip = PortugueseRoundTrip()
            return str(self._trip.text(text))
        if name == "mix":
            from samark.evaluation.attacks.human_mix import HumanMix

            return str(HumanMix(0.5).apply_one(text, random.Random(seed), human))
        raise ValueError(name)

    def embed(self, text: str) -> np.ndarray:
        from samark.segment import split_sentences

        e = self.embedder.encode(split_sentences(text)).astype(np.float32)
        return e / np.linalg.norm(e, axis=1, keepdims=True)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    from candidate_pools import load_pools  # type: ignore[import-not-found]

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("records")
    parser.add_argument("--keys", type=int, default=5)
    parser.add_argument("--nulls", type=int, default=499)
    parser.add_argument("--lengths", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--designs", nargs="+", default=list(DESIGNS))
    parser.add_argument("--candidates", type=int, default=32)
    parser.add_argument("--attacks", nargs="+", default=["none", "human"])
    parser.add_argument("--prompts", type=int, default=0, help="first P prompts (0: all)")
    parser.add_argument("--out")
    args = parser.parse_args()
    prompts = load_pools(Path(args.records))
    if args.prompts:
        prompts = prompts[: args.prompts]
    attacker: Attacks | None = None
    if set(args.attacks) - {"none", "human"}:
        from samark.embed import load_embedder

        attacker = Attacks(load_embedder("all-mpnet-base-v2"))
    out = Path(args.out).open("a") if args.out else None
    human_emb: dict[int, np.ndarray] = {}
    for name in args.designs:
        design = DESIGNS[name]
        start = time.perf_counter()
        law = KeySet.draw(design, args.keys + args.nulls, seed=7)
        nulls = KeySet(law.anchors[args.keys :], law.pivots[args.keys :], law.flags[args.keys :])
        rows = []
        for k in range(args.keys):
            key = law[k]
            scored = KeySet(
                np.concatenate([key.anchors, nulls.anchors]),
                np.concatenate([key.pivots, nulls.pivots]),
                np.concatenate([key.flags, nulls.flags]),
            )
            for p, steps in enumerate(prompts):
                rng = np.random.default_rng([k, p, 44])
                n_max = min(max(args.lengths), len(steps))
                sents, emb, matched = replay(steps, key, design, rng, n_max, args.candidates)
                human = steps[0]["human"]
                for attack in args.attacks:
                    if attack == "none":
                        texts_emb = {n: emb[:n] for n in args.lengths if n <= n_max}
                    elif attack == "human":
                        if p not in human_emb:
                            human_emb[p] = _embed_human(steps, attacker)
                        texts_emb = {n: human_emb[p][:n] for n in args.lengths}
                    else:
                        assert attacker is not None
                        texts_emb = {}
                        for n in args.lengths:
                            if n > n_max:
                                continue
                            attacked = attacker(attack, " ".join(sents[:n]), human, seed=k * 1000 + p)
                            texts_emb[n] = attacker.embed(attacked)
                    for n, e in texts_emb.items():
                        rows.append(
                            {
                                "design": name,
                                "key": k,
                                "prompt": steps[0]["prompt_index"],
                                "n": n,
                                "attack": attack,
                                "matched": matched if attack == "none" else None,
                                "p": p_value(scored, e, design),
                            }
                        )
        summarise(rows)
        print(f"  ({time.perf_counter() - start:.0f} s)", flush=True)
        if out:
            for r in rows:
                out.write(json.dumps(r) + "\n")
            out.flush()


def _embed_human(steps: list[dict[str, Any]], attacker: Attacks | None) -> np.ndarray:
    from samark.segment import split_sentences

    if attacker is None:
        from samark.embed import load_embedder

        embedder = load_embedder("all-mpnet-base-v2")
    else:
        embedder = attacker.embedder
    e = embedder.encode(split_sentences(steps[0]["human"])).astype(np.float32)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def summarise(rows: list[dict[str, Any]]) -> None:
    for (design, attack, n), group in _groups(rows).items():
        ps = np.array([r["p"] for r in group])
        print(
            f"{design:24s} {attack:6s} n={n:2d} texts={len(ps):4d} "
            f"p<.01 {np.mean(ps < 0.01):.2f}  p<.05 {np.mean(ps < 0.05):.2f}  "
            f"median p {np.median(ps):.3f}",
            flush=True,
        )


def _groups(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    out: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault((r["design"], r["attack"], r["n"]), []).append(r)
    return out


if __name__ == "__main__":
    main()
