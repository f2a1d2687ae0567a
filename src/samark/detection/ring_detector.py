"""Detection against a keyring: "did some key of the ring mark this text, and which one?"

Testing a text against K keys at ``p < alpha`` each flags far more than ``alpha`` of human
text (about 15% for 16 keys at 1%). The ring's p-value controls the family-wise error
instead: under H0 (the text depends on no key of the ring), ``p_value < alpha`` with
probability at most ``alpha``, whatever K. Two ways, chosen per ring:

- **max-statistic** (SAMark and SAMark-dagger, when every key shares one pivot law and the
  detection settings). Under H0 the K keys' pivots and the detector's M public null pivot
  sets are i.i.d. from one law, so the K + M statistics are exchangeable, and the rank of
  the ring's largest among them gives an exact p-value
  (:func:`samark.schemes.samark.statistics.ring_max_p_value`). It costs one text embedding and
  K + M projections, and pays for K keys only through the ranks: nearly the power of one
  key when one key marked the text.
- **Holm** (every other scheme, and rings whose keys differ in law). Each key's own p-value
  is valid for that key, so ``min(1, K * min p)`` is valid for the ring, and Holm's
  step-down gives each key an adjusted p-value with family-wise error control. A text is
  split and embedded once for the whole ring (:mod:`samark.detection.pipeline`: every
  key scores the same features).
  For samark-layered, the semantic layer of every key is scored in one pass as above, and
  each key's layered p-value (its semantic and token layers combined) enters Holm: its
  token layer's p-values are analytic and tiny on marked text, so a large ring of layered
  keys keeps far more power than a ring of SAMark keys (docs/operators.md).

The attributed key is the one with the largest statistic (max-statistic) or the smallest
p-value (Holm); its label, id and own p-value are reported. When the ring carries a payload
(2**b keys), the attributed key's position is the decoded value; a ring with flag bits
appends the relative signs of the attributed key's inferred flags as its low bits. A text
the ring does not flag is "unmarked": no key and no payload are attributed to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from samark.detection_result import Detection, json_safe
from samark.embed import Embedder
from samark.errors import EmptyTextError, SamarkError
from samark.keys import WatermarkKey
from samark.keys.keyring import Keyring, RingEntry, flag_value
from samark.schemes.base import (
    SharedResources,
    Watermark,
    create_scheme,
    scheme_class,
)
from samark.schemes.features import TextFeatures, text_features
from samark.schemes.ring_scores import HOLM, RingScore, RingScoring, holm_adjusted

# SAMark's ring pass lives with SAMark; these names keep working from here
from samark.schemes.samark.ring_scoring import MAX_STATISTIC, ring_null_count
from samark.text import counted
from samark.verdict import MarkEvidence

#: the label of the key of a ring of one (:meth:`RingDetector.of_scheme`)
SINGLE_KEY = "key"
__all__ = [
    "HOLM",
    "MAX_STATISTIC",
    "RingDetection",
    "RingDetector",
    "holm_adjusted",
    "ring_null_count",
]


@dataclass(frozen=True)
class RingDetection:
    """What a ring found in one text.

    ``p_value`` is the family-wise answer to "some key of the ring marked this text".
    ``best`` is the key with the strongest evidence and ``detection`` its own full
    detection (``key_p_value`` is its p-value alone: not corrected for the ring). When the
    text is flagged, ``label``, ``key_id`` and ``payload`` attribute it; otherwise they are
    None ("unmarked").
    """

    p_value: float
    alpha: float
    method: str
    best: RingEntry
    position: int
    detection: Detection
    #: every key's own p-value and its Holm-adjusted one, in ring order
    key_p_values: tuple[float, ...] = field(repr=False)
    adjusted_p_values: tuple[float, ...] = field(repr=False)
    labels: tuple[str, ...] = field(repr=False)
    payload_bits: int | None = None
    #: the payload's low bits, read from the attributed key's inferred flags
    flag_bits: int = 0
    #: one key, not a keyring (:meth:`RingDetector.of_scheme`): it reads as its detection
    single_key: bool = False

    @property
    def is_watermarked(self) -> bool:
        return self.p_value < self.alpha

    @property
    def label(self) -> str | None:
        return self.best.label if self.is_watermarked else None

    @property
    def key_id(self) -> str | None:
        return self.best.key_id if self.is_watermarked else None

    @property
    def key_p_value(self) -> float:
        return self.detection.p_value

    @property
    def payload(self) -> int | None:
        """The decoded payload (the attributed key's position, then its flag bits), or
        None: unmarked, or the ring carries none."""
        if not (self.is_watermarked and self.payload_bits):
            return None
        found = self.detection.details.get("flags", ())
        flags = [f for f in found if isinstance(f, int)] if isinstance(found, tuple) else []
        return self.position << self.flag_bits | flag_value(flags, self.flag_bits)

    @property
    def ring_size(self) -> int:
        return len(self.labels)

    # what record files and tables read off a detection
    @property
    def n_units(self) -> int:
        return self.detection.n_units

    @property
    def statistic(self) -> str:
        return self.detection.statistic

    def as_detection(self) -> Detection:
        """This answer as one :class:`Detection` (what the evaluation harness records):
        one key's own detection, or a keyring's with the ring's family-wise p-value and
        alpha (``z``, ``score`` and the sentences stay the attributed key's)."""
        if self.single_key:
            return self.detection
        return dataclasses.replace(self.detection, p_value=self.p_value, alpha=self.alpha)

    def ring_fields(self) -> dict[str, str | int | float]:
        """A keyring's answer beyond its p-value: its method and size, and the key it
        attributes (label, own p-value); empty for one key."""
        if self.single_key:
            return {}
        return {
            "method": self.method,
            "keys": self.ring_size,
            "key_label": self.best.label,
            "key_p_value": self.key_p_value,
        }

    def mark_evidence(self) -> MarkEvidence:
        """The mark's part of the one verdict (:mod:`samark.verdict`): this answer's
        p-value (a keyring's family-wise one) and, for one key, its layers and null draws."""
        d = self.detection
        fields: dict[str, object] = {"p_value": self.p_value, "alpha": self.alpha}
        fields.update(n_units=d.n_units, unit=d.unit)
        if self.single_key:
            fields["details"] = d.details
        return MarkEvidence.of_answer(fields)

    def describe(self) -> str:
        """The answer in words: the verdict, the p-value, what it rests on and, for a
        keyring, the key and payload it attributes the text to."""
        verdict = "watermarked" if self.is_watermarked else "not watermarked"
        units = counted(self.n_units, self.detection.unit)
        if self.single_key:
            # z only where the p-value is computed from it: beside the scan's or Fisher's
            # p, the paper's z reads as a verdict it is not (it stays in the JSON)
            d = self.detection
            z = f", z = {d.z:.2f}" if d.statistic == "z" or d.statistic.endswith("_z") else ""
            return f"{verdict}: p = {self.p_value:.4g} (alpha {self.alpha}), {units}{z}"
        found = (
            f" by key {self.label!r} (its own p = {self.key_p_value:.4g})"
            if self.is_watermarked
            else ""
        )
        payload = f", payload {self.payload}" if self.payload is not None else ""
        return (
            f"{verdict}{found}{payload}: p = {self.p_value:.4g} over a ring of "
            f"{counted(self.ring_size, 'key')} ({self.method}; alpha {self.alpha}), {units}"
        )

    def to_dict(self, *, details: bool = False) -> dict[str, object]:
        """JSON-ready fields (flat, so that they become table columns); with ``details``
        the best key's own detection in full and every key's p-values by label. One key
        (not a keyring) gives its detection's fields (:meth:`Detection.to_dict`) and its
        key's public id."""
        if self.single_key:
            return {**self.detection.to_dict(details=details), "key_id": self.best.key_id}
        out: dict[str, object] = {
            "scheme": self.detection.scheme,
            "p_value": self.p_value,
            "is_watermarked": self.is_watermarked,
            "alpha": self.alpha,
            "ring_method": self.method,
            "ring_keys": self.ring_size,
            "key_label": self.label,
            "key_id": self.key_id,
            "key_p_value": self.key_p_value,
            "payload": self.payload,
            "payload_bits": self.payload_bits,
            "flag_bits": self.flag_bits,
            "statistic": self.statistic,
            "n_units": self.n_units,
            "unit": self.detection.unit,
        }
        if details:
            out["best_key"] = self.best.label
            out["key"] = self.detection.to_dict(details=True)
            out["keys"] = {
                label: {"p_value": p, "adjusted_p_value": a}
                for label, p, a in zip(
                    self.labels, self.key_p_values, self.adjusted_p_values, strict=True
                )
            }
        return json_safe(out)


class RingDetector:
    """Detects the marks of every key of a ring, one built scheme per key (ring order)."""

    def __init__(
        self,
        entries: Sequence[RingEntry],
        schemes: Sequence[Watermark],
        *,
        alpha: float = 0.01,
        payload_bits: int | None = None,
        positions: Sequence[int] | None = None,
        flag_bits: int = 0,
    ) -> None:
        if not entries or len(entries) != len(schemes):
            raise ValueError("a ring detector needs one scheme per key, and at least one key")
        #: each key's position in its ring (what a payload decodes to)
        self.positions = tuple(range(len(entries)) if positions is None else positions)
        if len(self.positions) != len(entries):
            raise ValueError("one position per key")
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.entries = tuple(entries)
        self.schemes = tuple(schemes)
        self.alpha = alpha
        self.payload_bits = payload_bits
        self.flag_bits = flag_bits
        #: one key, not a keyring (:meth:`of_scheme`)
        self.single_key = False
        if flag_bits:
            _check_flag_payload(self.schemes, flag_bits)
        family = type(self.schemes[0])
        # one key is a ring of one: its scheme's own detection is the ring's answer
        self._scoring: RingScoring | None = (
            family.ring_scoring(self.schemes)
            if len(self.schemes) > 1 and all(type(s) is family for s in self.schemes)
            else None
        )
        self.method = HOLM if self._scoring is None else self._scoring.method

    @classmethod
    def of_scheme(cls, scheme: Watermark) -> RingDetector:
        """One key as a ring of one (the scheme's own key, labelled ``key``): every surface
        detects through a ring, and a ring of one answers exactly as its scheme does (at
        the scheme's own alpha)."""
        entry = RingEntry(label=SINGLE_KEY, key_id=scheme.key_id or "", created="")
        ring = cls([entry], [scheme])
        ring.single_key = True
        return ring

    @classmethod
    def from_ring(
        cls,
        ring: Keyring,
        scheme: str = "samark",
        *,
        shared: SharedResources | None = None,
        alpha: float = 0.01,
        at: str | None = None,
        **params: Any,
    ) -> RingDetector:
        """One ``scheme`` per key of ``ring`` (retired keys included: they still detect),
        sharing one embedder. With ``at`` (an ISO date or time), only the keys that were in
        use then: a smaller family, so more power for a text whose date is known."""
        keys = ring.load_keys()
        positions = list(range(len(keys)))
        if at is not None:
            used = {e.label for e in ring.in_use(at)}
            positions = [i for i, (e, _) in enumerate(keys) if e.label in used]
            keys = [keys[i] for i in positions]
        if not keys:
            raise SamarkError(
                f"the ring {ring.path} holds no key" + ("" if at is None else f" in use at {at}")
            )
        return cls.from_keys(
            keys,
            scheme,
            shared=shared,
            alpha=alpha,
            payload_bits=ring.payload_bits,
            positions=positions,
            flag_bits=ring.flag_bits,
            **params,
        )

    @classmethod
    def from_keys(
        cls,
        keys: Sequence[tuple[RingEntry, WatermarkKey]],
        scheme: str = "samark",
        *,
        shared: SharedResources | None = None,
        alpha: float = 0.01,
        payload_bits: int | None = None,
        positions: Sequence[int] | None = None,
        flag_bits: int = 0,
        **params: Any,
    ) -> RingDetector:
        """One ``scheme`` per labelled key (at ``positions`` of its ring; default
        0..K-1), sharing one embedder (the first key's, unless ``shared`` holds one);
        SAMark's family gets :func:`ring_null_count` null sets."""
        from samark.embed import load_embedder
        from samark.models import DEFAULT_GENERATOR

        if shared is None:
            shared = SharedResources(
                generator=str(params.pop("generator", DEFAULT_GENERATOR)),
                embedder=load_embedder(keys[0][1].embedder.name),
            )
        # sized for the ring (SAMark's family: enough null sets), once for every key
        params = scheme_class(scheme).ring_params(params, len(keys), alpha)
        schemes = [
            create_scheme(scheme, key=key, shared=shared, alpha=alpha, **params) for _, key in keys
        ]
        return cls(
            [e for e, _ in keys],
            schemes,
            alpha=alpha,
            payload_bits=payload_bits,
            positions=positions,
            flag_bits=flag_bits,
        )

    @property
    def name(self) -> str:
        return self.schemes[0].name

    def scheme_of(self, found: RingDetection) -> Watermark:
        """The scheme of the key a detection of this ring attributes (its best key)."""
        return self.schemes[self.entries.index(found.best)]

    def __repr__(self) -> str:
        return (
            f"RingDetector(scheme={self.name!r}, keys={len(self.entries)}, method={self.method!r})"
        )

    @property
    def embedder(self) -> Embedder | None:
        """The embedder a text is prepared with for this ring (its first key's; None: the
        ring scores no embeddings). Keys of a ring share one (:meth:`from_keys`)."""
        return next((s.embedder for s in self.schemes if s.embedder is not None), None)

    def detect(self, text: str) -> RingDetection:
        """Test one text against every key. Raises :class:`EmptyTextError` (in the
        scheme's own words) when it has nothing to score."""
        found = self.detect_prepared(text_features([text], self.embedder))[0]
        if isinstance(found, EmptyTextError):
            raise found
        return found

    def detect_many(self, texts: Sequence[str]) -> list[RingDetection | None]:
        """``detect`` on each text (None for one with nothing to score); every text is
        split and embedded once for the whole ring."""
        found = self.detect_prepared(text_features(texts, self.embedder))
        return [None if isinstance(r, EmptyTextError) else r for r in found]

    def detect_prepared(
        self, features: Sequence[TextFeatures]
    ) -> list[RingDetection | EmptyTextError]:
        """Each prepared text (:mod:`samark.detection.pipeline`) against every key, or its
        own error where it has nothing to score: the pipeline's ``score``."""
        if self._scoring is None:
            return self._holm(features)
        return [
            r if isinstance(r, EmptyTextError) else self._result(r)
            for r in self._scoring.score_prepared(features)
        ]

    def score_embeddings(
        self, embeddings: np.ndarray, sentences: list[str] | None = None
    ) -> RingDetection:
        """Score one text's precomputed unit sentence embeddings, shape (n, dim), against
        the ring (where the family scores embeddings: SAMark's max-statistic rings)."""
        if self._scoring is None:
            raise SamarkError("only a ring of SAMark keys sharing one pivot law scores embeddings")
        return self._result(self._scoring.score_embeddings(embeddings, sentences))

    def _holm(self, features: Sequence[TextFeatures]) -> list[RingDetection | EmptyTextError]:
        per_key = [scheme.detect_prepared(features) for scheme in self.schemes]
        out: list[RingDetection | EmptyTextError] = []
        for i in range(len(features)):
            results = [r[i] for r in per_key]
            empty = next((r for r in results if isinstance(r, EmptyTextError)), None)
            if empty is not None:
                out.append(empty)
                continue
            found = [r for r in results if not isinstance(r, EmptyTextError)]
            p = tuple(r.p_value for r in found)
            ring_p, best = RingScore.holm_best(p, [r.score for r in found])
            out.append(self._result(RingScore(ring_p, best, found[best], p)))
        return out

    def _result(self, score: RingScore) -> RingDetection:
        key_p = score.key_p_values
        return RingDetection(
            p_value=score.p_value,
            alpha=score.detection.alpha if self.single_key else self.alpha,
            method=self.method,
            best=self.entries[score.best],
            position=self.positions[score.best],
            detection=score.detection,
            key_p_values=tuple(float(p) for p in key_p),
            adjusted_p_values=tuple(holm_adjusted(key_p)),
            labels=tuple(e.label for e in self.entries),
            payload_bits=self.payload_bits,
            flag_bits=self.flag_bits,
            single_key=self.single_key,
        )


def refuse_flag_payload(scheme: str, flag_bits: int) -> None:
    """Refuse a ring that writes ``flag_bits`` payload bits in the flag pattern for a
    ``scheme`` that has no flag pattern to write them in (before anything is built)."""
    from samark.schemes.base import scheme_info, scheme_names

    if flag_bits and not scheme_info(scheme).payload_flags:
        able = [n for n in scheme_names() if scheme_info(n).payload_flags]
        raise SamarkError(
            f"this ring writes {flag_bits} payload bits in the flag pattern; "
            f"{scheme} has none: detect it with {', '.join(able)}"
        )


def _check_flag_payload(schemes: Sequence[Watermark], flag_bits: int) -> None:
    """A ring whose payload has flag bits needs schemes with a flag pattern of at least
    ``flag_bits + 1`` channels (flag 1 stays random; the bits are relative to it)."""
    for scheme in schemes:
        refuse_flag_payload(scheme.name, flag_bits)
        if not scheme.flag_channels:
            raise SamarkError(  # SAMark's family with keyed cells: their flags are the key's
                f"this ring writes {flag_bits} payload bits in the flag pattern; {scheme.name} "
                "with keyed semantic cells has none (a cell's flags are the key's): detect "
                "this ring without cells"
            )
        if scheme.flag_channels <= flag_bits:
            raise SamarkError(
                f"this ring writes {flag_bits} payload bits in the flags, which needs "
                f"{flag_bits + 1} channels; the scheme has {scheme.flag_channels}"
            )
