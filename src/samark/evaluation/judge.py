"""The paper's LLM judges: pairwise (W/L/T vs. unwatermarked, blind A/B order) and blind
multi-method ranking (AvgRank), through a chat model. The local default (SmolLM2-135M) is a
weak judge; reports label the judge by name. An endpoint reproduces the paper's protocol.
"""

from __future__ import annotations

import json
import random
import re
from typing import TYPE_CHECKING, Any

from samark.chat import chat_model

if TYPE_CHECKING:
    from samark.evaluation.runner import Run

PAIRWISE_SYSTEM = {
    "booksum": "Compare Summary A/B by accuracy, completeness, coherence, writing quality, and "
    "absence of obvious errors.",
    "c4": "Compare Continuation A/B by topical relevance, coherence, writing quality, "
    "informativeness, and absence of obvious errors.",
}
RANKING_SYSTEM = {
    "booksum": "Rank all summaries by accuracy, completeness, coherence, writing quality, and "
    "absence of obvious errors.",
    "c4": "Rank all continuations by topical relevance, coherence, writing quality, "
    "informativeness, and absence of obvious errors.",
}
LABELS = "ABCDEFGHIJKLMNOP"


def pairwise_messages(task: str, prompt: str, a: str, b: str) -> list[dict[str, str]]:
    user = (
        f"Prompt:\n{prompt}\n\nContinuation A:\n{a}\n\nContinuation B:\n{b}\n\n"
        'Reply with JSON only: {"winner": "A"} or {"winner": "B"} or {"winner": "tie"}.'
    )
    return [{"role": "system", "content": PAIRWISE_SYSTEM[task]}, {"role": "user", "content": user}]


def parse_pairwise(reply: str) -> str | None:
    """'A', 'B', 'tie', or None when the reply is not the asked JSON."""
    m = re.search(r"\{.*?\}", reply, re.S)
    if not m:
        return None
    try:
        winner = str(json.loads(m.group(0)).get("winner", "")).strip()
    except (json.JSONDecodeError, AttributeError):
        return None
    return {"a": "A", "b": "B", "tie": "tie"}.get(winner.lower())


def ranking_messages(task: str, prompt: str, texts: list[str]) -> list[dict[str, str]]:
    body = "\n\n".join(f"Continuation {LABELS[i]}:\n{t}" for i, t in enumerate(texts))
    user = (
        f"Prompt:\n{prompt}\n\n{body}\n\nReply with JSON only: a list of labels, best first; "
        'ties allowed as "A=B", e.g. ["B", "A=C"].'
    )
    return [{"role": "system", "content": RANKING_SYSTEM[task]}, {"role": "user", "content": user}]


def parse_ranking(reply: str, n: int) -> list[float] | None:
    """The rank (1 = best; ties share the mean rank) of each of the ``n`` labels, or None."""
    m = re.search(r"\[.*?\]", reply, re.S)
    if not m:
        return None
    try:
        groups = [str(g).replace(" ", "").split("=") for g in json.loads(m.group(0))]
    except json.JSONDecodeError:
        return None
    seen = [label for g in groups for label in g]
    if sorted(seen) != sorted(LABELS[:n]):
        return None
    ranks: dict[str, float] = {}
    pos = 1
    for g in groups:
        for label in g:
            ranks[label] = pos + (len(g) - 1) / 2
        pos += len(g)
    return [ranks[LABELS[i]] for i in range(n)]


def run_judge(run: Run) -> None:
    """Pairwise judgements vs. the unwatermarked row, and one blind ranking per item."""
    exp = run.experiment
    reference = next((s for s in exp.schemes if s.name == "unwatermarked"), None)
    if reference is None:
        return
    judge_spec: Any = exp.metrics.judge
    model = chat_model(judge_spec)
    task = exp.metrics.judge_task
    ref = {g["item"]: g for g in run._generations(reference)}
    for spec in exp.schemes:
        if spec is reference:
            continue
        for g in run._generations(spec):
            key = ("judge", spec.label, spec.fingerprint, g["item"], model.name)
            if g["item"] not in ref or key in run.quality:
                continue
            flip = random.Random(f"{exp.seed}/{spec.label}/{g['item']}").random() < 0.5
            a, b = (
                (ref[g["item"]]["text"], g["text"]) if flip else (g["text"], ref[g["item"]]["text"])
            )
            reply = model.chat(
                [pairwise_messages(task, g["prompt"], a, b)], max_tokens=32, temperature=0.0, seed=0
            )[0]
            winner = parse_pairwise(reply)
            mine = "B" if flip else "A"
            outcome = (
                None
                if winner is None
                else ("tie" if winner == "tie" else ("win" if winner == mine else "lose"))
            )
            run.quality.append(
                key,
                {"scheme": spec.label, "item": g["item"], "judge": model.name, "pairwise": outcome},
            )
    # ranking: every scheme with an output for the item, in a seeded random order
    by_item: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in exp.schemes:
        for g in run._generations(spec):
            by_item.setdefault(g["item"], {})[spec.label] = g
    for item, outs in by_item.items():
        labels = sorted(outs)
        rank_key = ("rank", item, ",".join(labels), model.name)
        if len(labels) < 2 or len(labels) > len(LABELS) or rank_key in run.quality:
            continue
        order = labels[:]
        random.Random(f"{exp.seed}/rank/{item}").shuffle(order)
        prompt = outs[order[0]]["prompt"]
        reply = model.chat(
            [ranking_messages(task, prompt, [outs[x]["text"] for x in order])],
            max_tokens=64,
            temperature=0.0,
            seed=0,
        )[0]
        ranks = parse_ranking(reply, len(order))
        run.quality.append(
            rank_key,
            {
                "item": item,
                "judge": model.name,
                "ranks": None if ranks is None else dict(zip(order, ranks, strict=True)),
            },
        )
