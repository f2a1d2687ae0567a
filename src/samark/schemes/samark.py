"""SAMark: self-anchored sentence-level watermarking (paper Alg. 1 and 2)."""

from __future__ import annotations

import dataclasses
import secrets
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from samark.config import SAMarkConfig
from samark.detection import Detection
from samark.detector import SAMarkDetector
from samark.embed import Embedder, load_embedder
from samark.keys import WatermarkKey
from samark.models import DEFAULT_GENERATOR
from samark.sampling.base import CandidateSampler
from samark.schemes.base import (
    Generation,
    ProgressCallback,
    SentenceCallback,
    SharedResources,
    Watermark,
    register_scheme,
)
from samark.selection import select
from samark.text import ngrams, words


class SAMark(Watermark):
    """SAMark with a secret ``key``.

    The embedder defaults to the one the key was made for; the generator (candidate
    sampler) is loaded on first ``generate`` only, so detection never loads an LM.
    """

    name = "samark"

    def __init__(
        self,
        key: WatermarkKey,
        *,
        config: SAMarkConfig | None = None,
        embedder: Embedder | None = None,
        sampler: CandidateSampler | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        self.config = config or SAMarkConfig()
        self.embedder = embedder or load_embedder(key.embedder.name)
        key.check_embedder(self.embedder.identity)
        self._key = key
        self._pivots = key.pivots(self.embedder.dim, self.config.channels)
        self._sampler = sampler
        self._generator = generator
        c = self.config
        self.detector = SAMarkDetector(
            key,
            self.embedder,
            channels=c.channels,
            kappa=c.kappa,
            use_tanh=c.tanh_detection,
            statistic=c.statistic,
            n_null=c.n_null,
            null_seed=c.null_seed,
            alpha=c.alpha,
        )

    def __repr__(self) -> str:
        return f"SAMark(key={self._key!r}, embedder={self.embedder.name!r})"

    @property
    def sampler(self) -> CandidateSampler:
        if self._sampler is None:
            from samark.sampling.transformers_engine import load_transformers_sampler

            self._sampler = load_transformers_sampler(self._generator)
        return self._sampler

    def detect(self, text: str) -> Detection:
        return self.detector.detect(text)

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """``detect`` on each text with one batched embedding call; ``None`` for a text
        without a sentence."""
        return self.detector.detect_many(texts)

    def detector_id(self) -> str:
        c = self.config
        return (
            f"samark/{self._key.key_id}/{self.embedder.name}/c{c.channels}/k{c.kappa}"
            f"/tanh{int(c.tanh_detection)}/{c.statistic}/null{c.n_null}.{c.null_seed}"
        )

    def generate(
        self,
        prompt: str,
        *,
        max_new_sentences: int | None = None,
        seed: int | None = None,
        progress: ProgressCallback | None = None,
        on_sentence: SentenceCallback | None = None,
    ) -> Generation:
        """Continue ``prompt`` with up to ``max_new_sentences`` watermarked sentences.

        ``on_sentence`` sees each sentence as it is chosen (a server streams it); when it
        returns True the generation ends there (a token budget).

        The flag pattern R comes from OS randomness and is never stored; with a ``seed``
        the whole run (R, candidate sampling, softmax picks) is reproducible instead.
        """
        if not isinstance(prompt, str):
            raise TypeError(f"prompt must be str, got {type(prompt).__name__}")
        c = self.config
        total = max_new_sentences or c.max_new_sentences
        seeder = np.random.default_rng(seed if seed is not None else secrets.randbits(128))
        flags = seeder.choice([-1.0, 1.0], size=c.channels)
        rng = np.random.default_rng(seeder.integers(2**63))

        start = time.perf_counter()
        context = prompt
        context_words = words(prompt)
        context_ngrams = set(ngrams(context_words, c.ngram_n))
        vocabulary = set(context_words)
        history = np.zeros((0, self.embedder.dim))
        chosen: list[str] = []
        fallbacks: Counter[str] = Counter()
        steps: list[dict[str, Any]] = []
        tokens_sampled = extra = 0
        sampling_s = embedding_s = 0.0
        for t in range(total):
            texts: list[str] = []
            embs: list[np.ndarray] = []
            choice = None
            drawn = 0
            for size, extra_draw, boundary in self._draw_plan():
                drawn += size
                batch = self.sampler.sample(
                    context, size, c.sampling, seed=int(seeder.integers(2**62))
                )
                tokens_sampled += batch.tokens_sampled
                sampling_s += batch.seconds
                extra += extra_draw
                new = batch.complete
                if new:
                    t0 = time.perf_counter()
                    embs.append(self._embed_unique(new))
                    embedding_s += time.perf_counter() - t0
                    texts.extend(new)
                    pool = np.concatenate(embs)
                    choice = select(
                        texts,
                        pool,
                        self._pivots,
                        flags,
                        context_ngrams,
                        vocabulary,
                        history,
                        kappa=c.selection_kappa,
                        epsilon=c.epsilon,
                        lambda_div=c.lambda_div,
                        lambda_nov=c.lambda_nov,
                        theta_sem=c.theta_sem,
                        theta_ngram=c.theta_ngram,
                        ngram_n=c.ngram_n,
                        ngram_filter=c.ngram_filter,
                        semantic_filter=c.semantic_filter,
                        use_tanh=c.tanh_generation,
                        saturation=c.adaptive_saturation,
                        rng=rng,
                    )
                if choice is None:
                    continue
                if c.adaptive and (
                    choice.n_saturated >= c.adaptive_matches
                    or (drawn >= c.adaptive_patience and choice.n_matched)
                ):
                    break
                if boundary and choice.n_matched:
                    break
            if choice is None:  # the model produced no complete sentence at all
                fallbacks["exhausted"] += 1
                break
            fallbacks[choice.kind] += 1
            sentence = texts[choice.index]
            history = np.vstack([history, pool[choice.index]])
            chosen.append(sentence)
            context += sentence
            new_words = words(sentence)
            context_words.extend(new_words)
            # only the n-grams that end in the new sentence are new
            context_ngrams.update(
                ngrams(context_words[-(len(new_words) + c.ngram_n - 1) :], c.ngram_n)
            )
            vocabulary.update(new_words)
            step: dict[str, Any] = {
                "kind": choice.kind,
                "candidates": choice.n_candidates,
                "ngram_pass": choice.n_ngram_pass,
                "semantic_pass": choice.n_semantic_pass,
                "matched": choice.n_matched,
                "saturated": choice.n_saturated,
                "matched_terms": choice.matched_terms,
            }
            if c.record_signal:
                step.update(step_signal(pool, choice.index, history[:-1], self._pivots, flags))
            steps.append(step)
            if progress:
                progress(t + 1, total)
            if on_sentence is not None and on_sentence(sentence, step):
                break
        count = getattr(self.sampler, "count_tokens", None)
        output_tokens = (
            sum(count(s) for s in chosen) if count else sum(len(words(s)) for s in chosen)
        )
        fallbacks.pop("matched", None)
        return Generation(
            scheme=self.name,
            prompt=prompt,
            text="".join(chosen).strip(),
            sentences=tuple(s.strip() for s in chosen),
            tokens_sampled=tokens_sampled,
            output_tokens=output_tokens,
            seconds=time.perf_counter() - start,
            sampling_seconds=sampling_s,
            embedding_seconds=embedding_s,
            fallbacks=dict(fallbacks),
            extra_batches=extra,
            steps=tuple(steps),
        )

    def _draw_plan(self) -> list[tuple[int, bool, bool]]:
        """The candidate draws of one step: (size, is an extra batch, ends a batch of N).

        Fixed N (the paper): N, then up to ``extra_batches`` more N while nothing matched.
        Adaptive: the same budget in chunks of ``adaptive_chunk``; the caller stops early
        once enough matches are saturated.
        """
        c = self.config
        chunk = c.adaptive_chunk if c.adaptive else c.candidates
        plan: list[tuple[int, bool, bool]] = []
        for attempt in range(1 + c.extra_batches):
            left = c.candidates
            while left > 0:
                size = min(chunk, left)
                left -= size
                plan.append((size, attempt > 0, left == 0))
        return plan

    def _embed_unique(self, texts: list[str]) -> np.ndarray:
        unique = list(dict.fromkeys(t.strip() for t in texts))
        table = dict(zip(unique, self.embedder.encode(unique), strict=True))
        return np.array([table[t.strip()] for t in texts])


def step_signal(
    pool: np.ndarray,
    chosen: int,
    history: np.ndarray,
    pivots: np.ndarray,
    flags: np.ndarray,
) -> dict[str, list[float]]:
    """Where one step's margin comes from, per channel, as cosines signed by the step's
    flags (positive = on the flag side): the candidate pool's mean and spread, the chosen
    sentence, and the topic offset of the text chosen so far (its mean embedding; empty
    before the first sentence). Research records only: they derive from the key."""
    signed = (pool @ pivots.T) * flags  # (candidates, channels)
    out = {
        "pool_mean": signed.mean(axis=0),
        "pool_sd": signed.std(axis=0),
        "chosen": signed[chosen],
    }
    if len(history):
        mean = history.mean(axis=0)
        out["topic"] = (mean @ pivots.T) * flags
    return {f"signal_{k}": [round(float(x), 5) for x in v] for k, v in out.items()}


def _with_shared(
    shared: SharedResources | None,
    config: SAMarkConfig | None,
    params: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(config fields, constructor arguments): the config's own fields, those named in
    ``params`` (an experiment's TOML names them flat), and the shared models."""
    names = {f.name for f in dataclasses.fields(SAMarkConfig)}
    fields = config.to_dict() if config else {}
    fields.update({k: params.pop(k) for k in list(params) if k in names})
    if shared is not None:
        params.setdefault("embedder", shared.embedder)
        params.setdefault("generator", shared.generator)
        if shared.research_records:
            fields["record_signal"] = True
    return fields, params


@register_scheme(
    "samark",
    unit="sentence",
    description="SAMark: self-anchored sentence-level watermark (this project's paper); exact "
    "key-exchangeability p-value",
)
def _samark(
    key: WatermarkKey,
    *,
    shared: SharedResources | None = None,
    config: SAMarkConfig | None = None,
    **kwargs: Any,
) -> SAMark:
    fields, kwargs = _with_shared(shared, config, kwargs)
    return SAMark(key, config=SAMarkConfig(**fields), **kwargs)


@register_scheme(
    "samark-dagger",
    unit="sentence",
    description="SAMark without the diversity terms and hard filters (the paper's ablation)",
)
def _samark_dagger(
    key: WatermarkKey,
    *,
    shared: SharedResources | None = None,
    config: SAMarkConfig | None = None,
    **kwargs: Any,
) -> SAMark:
    overrides, kwargs = _with_shared(shared, config, kwargs)
    for name in ("lambda_div", "lambda_nov", "ngram_filter", "semantic_filter"):
        overrides.pop(name, None)
    scheme = SAMark(key, config=SAMarkConfig.dagger(**overrides), **kwargs)
    scheme.name = "samark-dagger"
    return scheme
