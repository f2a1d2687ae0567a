"""Perplexity of a continuation given its prompt under an oracle LM (not the generator)."""

from __future__ import annotations

import math

import torch

from samark.sampling.transformers_engine import load_transformers_engine


class Perplexity:
    def __init__(self, model: str = "gemma-3-270m") -> None:
        self.lm = load_transformers_engine(model)
        self.name = self.lm.name

    @torch.inference_mode()
    def perplexity(self, prompt: str, text: str) -> float:
        """exp(mean token NLL of ``text``) conditioned on ``prompt`` (left-truncated)."""
        tok = self.lm.tokenizer
        ctx = tok(prompt, add_special_tokens=True)["input_ids"]
        cont = tok(" " + text.strip(), add_special_tokens=False)["input_ids"]
        if not cont:
            return float("nan")
        room = self.lm.max_context - len(cont)
        ids = (ctx[-room:] if room > 0 else []) + cont[: self.lm.max_context]
        with self.lm.model_lock:  # not beside a shared-prefix decode of the same model
            logits = self.lm.model(torch.tensor([ids], device=self.lm.device)).logits
        logits = logits[0, :-1].float().cpu()
        targets = torch.tensor(ids[1:])
        nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
        return math.exp(float(nll[-len(cont) :].mean()))
