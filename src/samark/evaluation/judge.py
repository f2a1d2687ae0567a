"""The paper's LLM judges: pairwise (W/L/T vs. unwatermarked, blind A/B order) and blind
multi-method ranking (AvgRank), through a chat model. The local default (SmolLM2-135M) is a
weak judge; reports label the judge by name. An endpoint reproduces the paper's protocol.

An endpoint follows the paper: one judgement per item with the A/B order drawn at random,
its JSON reply parsed strictly (one clear verdict or none). A local model rarely writes the
asked JSON (SmolLM2-135M echoes the template or continues the text), so it answers by
likelihood, the verdict ("A", "B" or "tie") most likely after the assistant prefix
``{"winner": "``, in both A/B orders (see ``_local_pairwise``); it does not rank. Records
keep the positions chosen (and the reply or log-probabilities), so a position bias shows.
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

import numpy as np

from samark.evaluation.chat import ChatModel, LocalChatModel, chat_model
from samark.evaluation.records import JudgeRecord, RankRecord
from samark.evaluation.stages import RunContext
from samark.json_types import JSONObject

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
    """'A', 'B', 'tie', or None when the reply is not one clear verdict in the asked JSON.

    A reply that names several verdicts (a small model echoing the template
    ``{"winner": "A"} or {"winner": "B"} ...``) is no verdict, nor is free prose."""
    verdicts = set()
    for m in re.finditer(r"\{[^{}]*\}", reply):
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "winner" in obj:
            verdicts.add(_VERDICTS.get(str(obj["winner"]).strip().lower()))
    if len(verdicts) != 1:
        return None
    return verdicts.pop()


_VERDICTS = {"a": "A", "b": "B", "tie": "tie"}
#: a local judge answers by the likelihood of each verdict after this assistant prefix
PAIRWISE_PREFIX = '{"winner": "'
PAIRWISE_OPTIONS = ("A", "B", "tie")


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


def _endpoint_pairwise(
    model: ChatModel, task: str, prompt: str, mine: str, ref: str, *, flip: bool
) -> JSONObject:
    """The paper's protocol: one blind judgement, A/B order drawn per item."""
    a, b = (ref, mine) if flip else (mine, ref)
    reply = model.chat(
        [pairwise_messages(task, prompt, a, b)], max_tokens=32, temperature=0.0, seeds=[0]
    )[0]
    winner = parse_pairwise(reply)
    outcome = _outcome(winner, mine="B" if flip else "A")
    return {"pairwise": outcome, "positions": [winner], "reply": reply[:300]}


def _local_pairwise(
    model: LocalChatModel, task: str, prompt: str, mine: str, ref: str
) -> JSONObject:
    """Both A/B orders, each verdict the most likely one after ``{"winner": "``; a win or a
    loss counts only when both orders agree, otherwise a tie (the position-consistency rule
    of MT-Bench). A small model picks one position whatever the texts; this cancels it."""
    scores = model.option_logprobs(
        [pairwise_messages(task, prompt, mine, ref), pairwise_messages(task, prompt, ref, mine)],
        prefix=PAIRWISE_PREFIX,
        options=PAIRWISE_OPTIONS,
    )
    winners = [PAIRWISE_OPTIONS[int(np.argmax(s))] for s in scores]
    first, second = _outcome(winners[0], mine="A"), _outcome(winners[1], mine="B")
    return {
        "pairwise": first if first == second else "tie",
        "positions": list(winners),
        "logprobs": [dict(zip(PAIRWISE_OPTIONS, s, strict=True)) for s in scores],
    }


def _outcome(winner: str | None, *, mine: str) -> str | None:
    if winner is None:
        return None
    return "tie" if winner == "tie" else ("win" if winner == mine else "lose")


def run_judge(run: RunContext) -> None:
    """Pairwise judgements vs. the unwatermarked row, and one blind ranking per item."""
    exp = run.experiment
    reference = exp.reference_row()
    if reference is None:
        return
    model = chat_model(exp.metrics.judge)
    task = exp.metrics.judge_task
    ref = {g["item"]: g for g in run.row_generations(reference, written=True)}
    for spec in exp.schemes:
        if spec is reference:
            continue
        for g in run.row_generations(spec, written=True):
            key = run.keys.judge(spec, g["item"], model.name)
            if g["item"] not in ref or key in run.quality:
                continue
            rec = (
                _local_pairwise(model, task, g["prompt"], g["text"], ref[g["item"]]["text"])
                if isinstance(model, LocalChatModel)
                else _endpoint_pairwise(
                    model,
                    task,
                    g["prompt"],
                    g["text"],
                    ref[g["item"]]["text"],
                    flip=random.Random(f"{exp.seed}/{spec.label}/{g['item']}").random() < 0.5,
                )
            )
            verdict = JudgeRecord(scheme=spec.label, item=g["item"], judge=model.name, extra=rec)
            run.quality.append(key, verdict.to_json())
    if isinstance(model, LocalChatModel):
        return  # a small local model cannot write a ranking of six texts (see the report)
    # ranking: every scheme with an output for the item, in a seeded random order
    by_item: dict[str, dict[str, dict[str, Any]]] = {}
    for spec in exp.schemes:
        for g in run.row_generations(spec, written=True):
            by_item.setdefault(g["item"], {})[spec.label] = g
    for item, outs in by_item.items():
        labels = sorted(outs)
        rank_key = run.keys.ranking(item, labels, model.name)
        if len(labels) < 2 or len(labels) > len(LABELS) or rank_key in run.quality:
            continue
        order = labels[:]
        random.Random(f"{exp.seed}/rank/{item}").shuffle(order)
        prompt = outs[order[0]]["prompt"]
        reply = model.chat(
            [ranking_messages(task, prompt, [outs[x]["text"] for x in order])],
            max_tokens=64,
            temperature=0.0,
            seeds=[0],
        )[0]
        ranks = parse_ranking(reply, len(order))
        ranking = RankRecord(
            item=item,
            judge=model.name,
            ranks=None if ranks is None else dict(zip(order, ranks, strict=True)),
            reply=reply[:300],
        )
        run.quality.append(rank_key, ranking.to_json())
