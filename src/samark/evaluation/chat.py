"""Chat LMs for attacks and judging: a local instruct model, or any OpenAI-compatible
endpoint (a user with GPT-4.1-mini reproduces the paper's protocol exactly).

The endpoint's API key is read from an environment variable (``api_key_env``), never from
the experiment file, and never logged or stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from transformers import GenerationConfig

from samark.errors import SamarkError
from samark.models import DEFAULT_GENERATOR
from samark.openai_client import openai_client
from samark.sampling.transformers_engine import left_pad

Messages = list[dict[str, str]]


class ChatModel(Protocol):
    name: str

    def chat(
        self,
        conversations: list[Messages],
        *,
        max_tokens: int,
        temperature: float,
        seeds: Sequence[int],
    ) -> list[str]:
        """One reply per conversation, the i-th sampled under ``seeds[i]`` alone."""
        ...


class LocalChatModel:
    """An instruct model's chat template through transformers, batched with left padding.
    The default (SmolLM2-135M-Instruct) is small: its rewrites are light and its judgements
    weak; reports label it so."""

    def __init__(self, model: str = DEFAULT_GENERATOR, batch_size: int = 8) -> None:
        from samark.sampling.transformers_engine import load_transformers_engine

        self.lm = load_transformers_engine(model)
        self.name = f"local:{self.lm.name}"
        self.batch_size = batch_size
        if self.lm.tokenizer.chat_template is None:
            raise SamarkError(f"{self.lm.name} has no chat template; use an instruct model")

    @torch.inference_mode()
    def chat(
        self,
        conversations: list[Messages],
        *,
        max_tokens: int,
        temperature: float,
        seeds: Sequence[int],
    ) -> list[str]:
        """Greedy replies are batched; sampled ones are drawn one conversation at a time,
        each under its own seed (a batch shares one random stream, so a reply would depend
        on its neighbours)."""
        _check_seeds(conversations, seeds)
        size = self.batch_size if temperature <= 0 else 1
        out: list[str] = []
        for start in range(0, len(conversations), size):
            batch = conversations[start : start + size]
            out.extend(self._chat_batch(batch, max_tokens, temperature, seeds[start]))
        return out

    def _chat_batch(
        self, batch: list[Messages], max_tokens: int, temperature: float, seed: int
    ) -> list[str]:
        lm = self.lm
        tok = lm.tokenizer
        pad = lm.pad_id
        rows = [_template_ids(tok, m)[-(lm.max_context - max_tokens) :] for m in batch]
        width = max(len(r) for r in rows)
        ids, mask = left_pad(rows, pad)
        torch.manual_seed(seed)
        config = GenerationConfig(
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_p=0.95 if temperature > 0 else None,
            max_new_tokens=max_tokens,
            pad_token_id=pad,
            eos_token_id=sorted(lm.eos_ids) or None,
        )
        model = lm.model
        with lm.model_lock:  # not beside a shared-prefix decode of the same model
            gen = model.generate(
                input_ids=ids.to(lm.device),
                attention_mask=mask.to(lm.device),
                generation_config=config,
            ).cpu()
        return [str(tok.decode(row, skip_special_tokens=True)).strip() for row in gen[:, width:]]

    @torch.inference_mode()
    def option_logprobs(
        self, conversations: list[Messages], *, prefix: str, options: tuple[str, ...]
    ) -> list[list[float]]:
        """For each conversation, the log-probability of each option as the start of the
        model's reply after ``prefix`` (the sum over the option's tokens). A small model
        that cannot write an asked format still states a preference this way."""
        tok = self.lm.tokenizer
        head = tok.encode(prefix, add_special_tokens=False)
        tails = []
        for option in options:
            ids = tok.encode(prefix + option, add_special_tokens=False)
            # the option's own tokens, as the model would write them after the prefix
            own = ids[len(head) :] if ids[: len(head)] == head else None
            tails.append(own or tok.encode(option, add_special_tokens=False))
        longest = max(len(t) for t in tails)
        model = self.lm.model
        out = []
        for messages in conversations:
            context = (_template_ids(tok, messages) + head)[-(self.lm.max_context - longest) :]
            rows = [context + t for t in tails]
            ids = torch.full((len(rows), max(map(len, rows))), self.lm.pad_id, dtype=torch.long)
            mask = torch.zeros_like(ids)
            for i, r in enumerate(rows):  # right padding: positions stay those of the context
                ids[i, : len(r)] = torch.tensor(r)
                mask[i, : len(r)] = 1
            with self.lm.model_lock:  # not beside a shared-prefix decode of the same model
                logits = model(
                    input_ids=ids.to(self.lm.device), attention_mask=mask.to(self.lm.device)
                ).logits
            logp = torch.log_softmax(logits.float().cpu(), -1)
            out.append(
                [
                    sum(float(logp[i, len(context) + j - 1, t]) for j, t in enumerate(tail))
                    for i, tail in enumerate(tails)
                ]
            )
        return out


def _check_seeds(conversations: list[Messages], seeds: Sequence[int]) -> None:
    if len(seeds) != len(conversations):
        raise SamarkError(
            f"{len(conversations)} conversations need as many seeds, got {len(seeds)}"
        )


def _template_ids(tok: Any, messages: Messages) -> list[int]:
    out = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(out["input_ids"] if hasattr(out, "keys") else out)


class OpenAIChatModel:
    """A chat endpoint that speaks OpenAI's API, with retries and timeouts."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 4,
    ) -> None:
        self.name = f"endpoint:{model}"
        self.model = model
        self._client = openai_client(
            base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries
        )

    def __repr__(self) -> str:
        return f"OpenAIChatModel({self.name!r})"

    def chat(
        self,
        conversations: list[Messages],
        *,
        max_tokens: int,
        temperature: float,
        seeds: Sequence[int],
    ) -> list[str]:
        import openai

        _check_seeds(conversations, seeds)
        out = []
        for messages, seed in zip(conversations, seeds, strict=True):
            try:
                resp = self._client.chat.completions.create(
                    model=self.model,
                    messages=messages,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    seed=int(seed),
                )
            except openai.OpenAIError as e:
                raise SamarkError(f"{self.name}: request failed: {type(e).__name__}: {e}") from None
            out.append((resp.choices[0].message.content or "").strip())
        return out


def chat_model(spec: dict[str, Any] | str | None) -> ChatModel:
    """``None``/``"local"``: the local default; ``{"model": preset}`` a local preset;
    ``{"base_url": ..., "model": ...}`` an endpoint."""
    if spec is None or spec == "local":
        return LocalChatModel()
    if isinstance(spec, str):
        return LocalChatModel(spec)
    spec = dict(spec)
    if "base_url" in spec:
        return OpenAIChatModel(**spec)
    return LocalChatModel(**spec)
