"""Each sentence's part in each layer of the layered mark, for the page and
``/v1/detect`` with ``details`` (``SAMarkLayered.evidence``).

The semantic layer's part is the sentence's ``sentence_p_values`` entry; the token
layer's is the sentence scored on its own (its distinct (context, token) pairs, the green
ones among them, their exact binomial tail); ``p_combined`` joins the two as the scheme
joins the text's (Fisher by default). The two sub-keys are independent, so on a sentence
that does not depend on the key the combination is as valid as the text's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypedDict

from samark.detection_result import Detection
from samark.schemes.samark.layer_combination import Combine, combine_p_values
from samark.token_layer import GreenListLayer


class LayeredScheme(Protocol):
    """What the evidence reads of a layered mark (``SAMarkLayered``): its token layer, how
    it tokenises a sentence and how it joins the layers."""

    @property
    def token_layer(self) -> GreenListLayer: ...

    def token_ids(self, text: str) -> Sequence[int]: ...

    combine: Combine
    contradiction: float


class SentenceLayers(TypedDict):
    """One sentence's part in each layer of a layered mark."""

    p_semantic: float
    tokens_scored: int
    tokens_green: int
    p_token: float
    p_combined: float


def sentence_layers(scheme: LayeredScheme, detection: Detection) -> list[SentenceLayers]:
    """Each sentence's part in each layer (module docstring)."""
    parts: list[SentenceLayers] = []
    for sentence, p_semantic in zip(detection.sentences, detection.sentence_p_values, strict=True):
        score = scheme.token_layer.score(scheme.token_ids(sentence))
        p_token = float(score.p_value)
        combined = combine_p_values(
            p_semantic, p_token, method=scheme.combine, contradiction=scheme.contradiction
        )
        parts.append(
            {
                "p_semantic": float(p_semantic),
                "tokens_scored": int(score.n_scored),
                "tokens_green": int(score.n_green),
                "p_token": p_token,
                "p_combined": float(combined),
            }
        )
    return parts
