"""SAMark with a token layer: one text carries SAMark's semantic mark and a keyed green-list
token mark (:mod:`samark.token_layer`), and detection returns one exact p-value.

Generation is SAMark's Alg. 1 unchanged, except that the candidate engine samples every
candidate row under the token layer. The sentence SAMark picks then carries both marks,
at the same sampling cost (the bias is a vectorised mask per row and step).

Detection scores each layer with its own exact p-value:

- semantic: SAMark's detector with the ``scan`` statistic by default (it keeps its power
  when human sentences are mixed in), exact over keys by pivot exchangeability, with
  per-sentence p-values for localisation;
- token: the green count among distinct (context, token) pairs, an exact binomial tail.

Both sub-keys derive one-way from the key file's one secret (pivots under one domain, the
green list under another), so over keys they are independent. On a text that does not
depend on the key (H0), each layer's p-value is then a function of the text and its own
sub-key alone: the two p-values are independent and each uniform or conservative, and
Fisher's combination ``x (1 - ln x)`` with ``x = p_semantic * p_token`` is exact (or
conservative) over keys. ``combine="both"`` uses ``max(p_semantic, p_token)`` instead:
the text is called marked only when both layers are (an intersection-union test, valid at
the same level), so that a forged layer alone never decides.

A strong contradiction overrides Fisher: when one layer's p-value is at least
``contradiction`` (default 0.99, its statistic in the bottom 1% of its null), the combined
p-value is the larger of the two, so the other layer alone cannot carry the decision. This
only removes rejections, so the combined p-value stays valid. It does *not* stop a forged
token layer on human text, whose semantic p-value is uniform: against forgery the defences
are the token layer's 4-token context (the stealing attacks learn one-token contexts from
a few thousand outputs) and ``combine="both"`` where a forgery is the threat
(docs/layered.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import ClassVar, Self, cast

import numpy as np

from samark.detection_result import Detail, Detection
from samark.embed import Embedder
from samark.errors import EmptyTextError, SamarkError
from samark.keys import WatermarkKey
from samark.models import (
    DEFAULT_GENERATOR,
    generator_tokenizer,
    generator_vocab_size,
    resolve_generator,
)
from samark.sampling.base import Engine, engine_abilities
from samark.schemes.base import (
    SharedResources,
    Watermark,
    register_scheme,
    require_key,
    split_params,
)
from samark.schemes.features import TextFeatures, text_features
from samark.schemes.ring_scores import HOLM, RingScore, RingScoring
from samark.schemes.samark.config import SAMarkConfig, load_presets
from samark.schemes.samark.detector import embedded_of, ring_passes
from samark.schemes.samark.layer_combination import (
    COMBINES,
    Combine,
    combine_p_values,
    combined_z,
)
from samark.schemes.samark.ring_scoring import share_null
from samark.schemes.samark.scheme import SAMark, samark_config_from_params
from samark.schemes.sentence_loop import sentence_models
from samark.token_layer import GreenListLayer, TokenLayerConfig, TokenLayerScore

#: candidates a sentence when a config leaves them out: half the paper's 64, the shipped
#: default since 2026-12-05 (issue 63: every paper-protocol column within 2.5 points of
#: N = 64 at half the tokens; docs/parameters.md, "Candidates: 32 by default"). The paper's
#: ``samark`` keeps 64
DEFAULT_CANDIDATES = 32
#: engines that can apply a token layer on every candidate row
TOKEN_LAYER_ENGINES = "the local transformers engine (TransformersEngine) or vLLM (VLLMEngine)"


def token_layer_of(
    key: WatermarkKey, vocab_size: int, config: TokenLayerConfig | None = None
) -> GreenListLayer:
    """The layered mark's token layer under ``key``: its sub-key is 256 bits derived
    one-way from the key under their own label, so the layer (and an attacker's view of
    it) says nothing of the pivots. Every key works, also one without an embedder."""
    secret = b"".join(
        w.to_bytes(8, "little") for w in key.derive_ints("samark-layered/token", 4, bits=64)
    )
    return GreenListLayer(secret, vocab_size, config)


@register_scheme("samark-layered")
class SAMarkLayered(SAMark):
    """SAMark plus a green-list token layer applied inside the candidate engine.

    ``generator`` names the model that writes (a preset or a local folder); its tokenizer
    is the token layer's, and detection loads only the tokenizer, never the model.
    """

    name = "samark-layered"
    #: the token layer its engine applies on every candidate row (and detection scores)
    token_layer: GreenListLayer
    #: not the paper's scheme: its experiment rows were always scored with scan, the
    #: product's default, so its "paper" preset changes nothing (presets/samark-layered.toml)
    presets: ClassVar[Mapping[str, Mapping[str, object]]] = load_presets("samark-layered")

    def __init__(
        self,
        key: WatermarkKey,
        *,
        config: SAMarkConfig | None = None,
        token: TokenLayerConfig | None = None,
        combine: Combine = "fisher",
        contradiction: float = 0.99,
        embedder: Embedder | None = None,
        engine: Engine | None = None,
        generator: str = DEFAULT_GENERATOR,
    ) -> None:
        if combine not in COMBINES:
            raise ValueError(f"combine must be one of {COMBINES}, got {combine!r}")
        if not 0.5 < contradiction <= 1.0:
            raise ValueError(f"contradiction must be in (0.5, 1], got {contradiction}")
        if engine is not None and not engine_abilities(engine).token_layer:
            raise SamarkError(
                f"samark-layered applies its token layer inside the candidate engine, and "
                f"{type(engine).__name__} cannot (a remote server samples on its own); use "
                f"{TOKEN_LAYER_ENGINES}, or the scheme 'samark'"
            )
        if config is None:
            config = SAMarkConfig.of(candidates=DEFAULT_CANDIDATES)
        super().__init__(key, config=config, embedder=embedder, engine=engine, generator=generator)
        self.combine: Combine = combine
        self.contradiction = contradiction
        self.generator_name, path = resolve_generator(generator)
        self._generator_path = str(path)
        self.token_layer = token_layer_of(key, generator_vocab_size(self._generator_path), token)

    @classmethod
    def from_params(
        cls, key: WatermarkKey | None, shared: SharedResources | None, params: Mapping[str, object]
    ) -> Self:
        """SAMark's parameters, the token layer's (``gamma``, ``delta``, ``context``) and
        ``combine``/``contradiction``; its candidates ``DEFAULT_CANDIDATES`` unless named."""
        given = dict(params)
        if given.get("config") is None:
            given.setdefault("candidates", DEFAULT_CANDIDATES)
        token, given = split_params(TokenLayerConfig, given)
        built, rest = samark_config_from_params(shared, given)
        combine = rest.pop("combine", "fisher")
        contradiction = rest.pop("contradiction", 0.99)
        if combine not in COMBINES or not isinstance(contradiction, int | float):
            raise ValueError(
                f"combine must be one of {COMBINES} and contradiction a number, got "
                f"{combine!r} and {contradiction!r}"
            )
        return cls(
            require_key(cls.name, key),
            config=built,
            token=token,
            combine=cast(Combine, combine),
            contradiction=float(contradiction),
            **sentence_models(shared, rest),
        )

    @classmethod
    def default_cells(cls, key: WatermarkKey) -> int:
        """The keyed cells of a config that leaves them out: the key's own (64 for a key
        ``samark keygen`` makes, 0 for one written before cells were the default)."""
        return key.samark.cells

    def __repr__(self) -> str:
        return (
            f"SAMarkLayered(key={self.key!r}, embedder={self.embedder.name!r}, "
            f"generator={self.generator_name!r}, token={self.token_layer!r})"
        )

    @property
    def token_config(self) -> TokenLayerConfig:
        return self.token_layer.config

    def detector_id(self) -> str:
        t = self.token_config
        return (
            f"samark-layered/{super().detector_id()}/{self.generator_name}"
            f"/g{t.gamma}/h{t.context}/{self.combine}{self.contradiction}"
        )

    def token_ids(self, text: str) -> list[int]:
        """The generator tokenizer's ids of ``text`` without the whitespace around it (no
        special tokens): a text pasted with a trailing newline or leading spaces scores as
        the text itself (a generated text has none; the semantic layer ignores it too)."""
        tokenize = generator_tokenizer(self._generator_path)
        ids = tokenize(text.strip(), add_special_tokens=False)["input_ids"]
        return [int(i) for i in ids]

    def evidence(self, detection: Detection) -> dict[str, object]:
        """``sentence_layers``: each sentence's part in each layer
        (:func:`~samark.schemes.samark.layered_evidence.sentence_layers`)."""
        from samark.schemes.samark.layered_evidence import sentence_layers

        return {"sentence_layers": sentence_layers(self, detection)}

    def detect(self, text: str) -> Detection:
        found = self.detect_prepared(text_features([text], self.embedder))[0]
        if isinstance(found, EmptyTextError):
            raise found
        return found

    def detect_many(self, texts: Sequence[str]) -> list[Detection | None]:
        """Both layers for each text, the semantic layer's embeddings in one call."""
        found = self.detect_prepared(text_features(texts, self.embedder))
        return [None if isinstance(d, EmptyTextError) else d for d in found]

    def detect_prepared(self, features: Sequence[TextFeatures]) -> list[Detection | EmptyTextError]:
        """Both layers for each prepared text: the semantic layer on its embeddings, the
        token layer on its text, tokenised once."""
        semantic = self.detector.detect_prepared(features)
        return [
            s if isinstance(s, EmptyTextError) else self.combine_layers(s, f.text)
            for s, f in zip(semantic, features, strict=True)
        ]

    @classmethod
    def ring_scoring(cls, schemes: Sequence[Watermark]) -> RingScoring | None:
        """One semantic pass for every key, where the keys share one semantic null law
        and one token layer setting (its generator, context and combination)."""
        layered = [cast(SAMarkLayered, s) for s in schemes]
        first = layered[0]
        same = share_null([s.detector for s in layered]) and all(
            s.generator_name == first.generator_name
            and s.token_config == first.token_config
            and (s.combine, s.contradiction) == (first.combine, first.contradiction)
            for s in layered[1:]
        )
        return LayeredHolmRing(layered) if same else None

    def combine_layers(self, semantic: Detection, text: str) -> Detection:
        """The layered detection of ``text`` from its semantic layer's detection (this
        key's) and the token layer scored here."""
        if not semantic.n_units:
            raise EmptyTextError("the text has no sentence to score")
        return self.layers(semantic, self.token_layer.score(self.token_ids(text)))

    def layers(self, semantic: Detection, token: TokenLayerScore) -> Detection:
        """The layered detection from this key's semantic layer's detection and its token
        layer's score of the same text."""
        p_sem, p_tok = semantic.p_value, token.p_value
        p = combine_p_values(p_sem, p_tok, method=self.combine, contradiction=self.contradiction)
        z = combined_z(p)
        details: dict[str, Detail] = {
            "p_semantic": float(p_sem),
            "p_token": float(p_tok),
            "semantic_score": float(semantic.score),
            "token_z": float(token.z),
            "green_fraction": float(token.green_fraction),
            "tokens_scored": token.n_scored,
            "combine": self.combine,
            **semantic.details,
        }
        return Detection(
            scheme=self.name,
            p_value=p,
            alpha=self.alpha,
            z=z,
            statistic=f"{self.combine}({semantic.statistic},green)",
            score=-2.0 * math.log(max(p_sem * p_tok, 1e-300)),
            n_units=semantic.n_units,
            unit="sentence",
            sentences=semantic.sentences,
            sentence_p_values=semantic.sentence_p_values,
            details=details,
        )


class LayeredHolmRing:
    """A ring of layered keys: every key's semantic layer from one pass (one embedding,
    one null pool; with keyed cells one pass over the null cell draws for all the texts),
    the text tokenised once, and Holm over the keys' layered p-values (a
    token layer's p-value is analytic, so a large ring keeps far more power than the
    max-statistic over SAMark keys gives)."""

    method = HOLM

    def __init__(self, schemes: Sequence[SAMarkLayered]) -> None:
        self.schemes = list(schemes)

    def score_embeddings(self, embeddings: np.ndarray, sentences: list[str] | None) -> RingScore:
        raise SamarkError(
            "a ring of layered keys scores texts, not embeddings: its token layer reads the "
            "text's tokens"
        )

    def score_prepared(self, features: Sequence[TextFeatures]) -> list[RingScore | EmptyTextError]:
        detectors = [s.detector for s in self.schemes]
        out: list[RingScore | EmptyTextError] = []
        passes = ring_passes(detectors, embedded_of(features, detectors[0].embedder))
        for f, scored in zip(features, passes, strict=True):
            if scored is None:
                out.append(EmptyTextError("the text has no sentence to score"))
                continue
            ids = self.schemes[0].token_ids(f.text)  # tokenised once for every key
            tokens = [s.token_layer.score(ids) for s in self.schemes]
            p = tuple(
                combine_p_values(
                    p_sem, token.p_value, method=s.combine, contradiction=s.contradiction
                )
                for s, p_sem, token in zip(self.schemes, scored.p_values(), tokens, strict=True)
            )
            ring_p, best = RingScore.holm_best(p, [float(x) for x in scored.own])
            detection = self.schemes[best].layers(scored.detection(best), tokens[best])
            out.append(RingScore(ring_p, best, detection, p))
        return out
