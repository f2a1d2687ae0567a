"""Candidates from any OpenAI-compatible completions server (vLLM, llama.cpp, ``transformers
serve``): one ``/v1/completions`` request with ``n=N``.

Sentence ends are found client-side with the project's segmenter, exactly as the local
engine does: the request stops at a newline or ``max_sentence_tokens``, and every returned
token counts as sampled. A server that returns fewer than ``n`` choices (some ignore ``n``)
is asked again for the rest, up to ``max_rounds`` requests. Connection errors and 5xx
answers are retried with backoff by the ``openai`` client; what still fails raises
:class:`ServerError` with the server's message.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from samark.errors import SamarkError
from samark.openai_client import openai_client
from samark.sampling.base import (
    SAMPLES_ONLY,
    Candidate,
    CandidateBatch,
    LogitsBias,
    RowPruner,
    SamplingParams,
)
from samark.sampling.engines import register_engine
from samark.text import words

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ServerError(SamarkError):
    """The completions server is down, refused the request, or sent nothing usable."""


class OpenAICompletionsEngine:
    """``sample(prefix, n, params)`` through ``POST {base_url}/completions``: the server
    samples on its own, so no token layer, steering or pruning applies here."""

    abilities = SAMPLES_ONLY
    #: the server holds the model and its tokenizer
    tokenizer: PreTrainedTokenizerBase | None = None

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout: float = 120.0,
        max_retries: int = 3,
        max_rounds: int | None = None,
        stop: tuple[str, ...] = ("\n",),
        extra_body: Mapping[str, object] | None = None,
    ) -> None:
        self.name = f"server:{model}"
        self.model = model
        self.base_url = base_url
        self.stop = list(stop)
        self.extra_body = dict(extra_body or {})
        self.max_rounds = max_rounds
        self.last_requests = 0  # requests the last ``sample`` needed
        self._client = openai_client(
            base_url, api_key_env=api_key_env, timeout=timeout, max_retries=max_retries
        )

    def close(self) -> None:
        """Nothing to release: the server is another process's."""

    def count_tokens(self, text: str) -> int:
        """``text``'s length in words: the server holds the tokenizer."""
        return len(words(text))

    def reachable(self, timeout: float = 3.0) -> bool:
        """Whether the server answers its model list now (a readiness probe; no retries)."""
        try:
            self._client.with_options(timeout=timeout, max_retries=0).models.list()
        except Exception:  # any failure to answer is "not reachable": the probe says so
            return False
        return True

    def __repr__(self) -> str:
        return f"OpenAICompletionsEngine({self.base_url!r}, model={self.model!r})"

    def sample(
        self,
        prefix: str,
        n: int,
        params: SamplingParams,
        *,
        seed: int | None = None,
        token_layer: LogitsBias | None = None,
        prune: RowPruner | None = None,
    ) -> CandidateBatch:
        import openai

        if n < 1:
            raise ValueError("n must be >= 1")
        if token_layer is not None or prune is not None:
            raise SamarkError(
                f"{self.name} samples on the server: it cannot apply a token layer, "
                "steering or row pruning (use a local engine: transformers or vLLM)"
            )
        start = time.perf_counter()
        texts: list[tuple[str, str | None]] = []
        sampled = prompt_tokens = 0
        rounds = self.max_rounds or n  # a server ignoring n needs n requests
        self.last_requests = 0
        for r in range(rounds):
            want = n - len(texts)
            if want <= 0:
                break
            self.last_requests += 1
            try:
                resp = self._client.completions.create(
                    model=self.model,
                    prompt=prefix,
                    n=want,
                    max_tokens=params.max_sentence_tokens,
                    temperature=params.temperature,
                    top_p=params.top_p,
                    stop=self.stop or None,
                    seed=None if seed is None else seed + r,
                    extra_body=self.extra_body or None,
                )
            except openai.APIConnectionError as e:
                raise ServerError(f"{self.base_url} is unreachable: {e}") from None
            except openai.APIStatusError as e:
                raise ServerError(
                    f"{self.base_url} refused the request ({e.status_code}): {e.message}"
                ) from None
            except openai.OpenAIError as e:
                raise ServerError(f"{self.base_url}: {type(e).__name__}: {e}") from None
            if not resp.choices:
                raise ServerError(f"{self.base_url} returned no choices")
            for choice in resp.choices[:want]:
                texts.append((choice.text or "", choice.finish_reason))
            if resp.usage is not None:
                sampled += resp.usage.completion_tokens
                prompt_tokens = resp.usage.prompt_tokens
        if len(texts) < n:
            raise ServerError(
                f"{self.base_url} returned {len(texts)} of {n} choices in {rounds} requests"
            )
        candidates = tuple(Candidate.from_completion(text, finish, 0) for text, finish in texts)
        return CandidateBatch(candidates, sampled, prompt_tokens, time.perf_counter() - start)


@register_engine("openai")
def load_openai_engine(model: str) -> OpenAICompletionsEngine:
    """The engine of the spec ``openai:URL#MODEL``: candidates from the OpenAI-compatible
    server at ``URL`` (``http(s)://HOST/v1``) serving ``MODEL``."""
    url, _, served = model.partition("#")
    if not url.startswith(("http://", "https://")) or not served:
        raise SamarkError(
            "the openai engine is 'openai:URL#MODEL' (or 'URL#MODEL'), e.g. "
            f"http://127.0.0.1:8000/v1#smollm2, not {model!r}"
        )
    return OpenAICompletionsEngine(url, served)
