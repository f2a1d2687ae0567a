"""SAMark's parameters: one validated, immutable config with the paper's defaults."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from samark.keys.samark_material import NULL_DRAWS, check_cells
from samark.sampling.base import SamplingParams
from samark.schemes.base import SchemeConfig, check
from samark.schemes.samark.selection import MARGIN_REFERENCES, MarginReference, SelectionRule
from samark.schemes.samark.statistics import STATISTICS, Statistic


@dataclass(frozen=True)
class SAMarkConfig(SchemeConfig):
    """Every knob of SAMark generation (paper Alg. 1) and detection (Alg. 2).

    Defaults are the paper's (c=2, N=64, kappa=30, lambda_div=0.35, lambda_nov=0.2,
    theta_sem=0.8, theta_ngram=0.4 with n=4, temperature 0.7, top_p 0.95, 12 sentences).
    ``epsilon`` is ours (the paper gives none): see ``docs/parameters.md``.
    """

    #: SAMark-dagger's settings (the paper's "All Off" row): the diversity-aware filters
    #: and the soft regularisation off
    DAGGER: ClassVar[dict[str, Any]] = {
        "lambda_div": 0.0,
        "lambda_nov": 0.0,
        "ngram_filter": False,
        "semantic_filter": False,
    }

    # watermark
    channels: int = 2
    # keyed semantic cells (samark.schemes.samark.cells): 0 is the paper's static pivots;
    # M >= 2 cuts meaning space into M keyed cells, each with its own pivots and flags, and
    # scores every sentence on its own cell's (one random sign a generation instead of
    # c random flags). Not with payload_flags, steering or row pruning; keyrings take it.
    # None: the scheme's default, 0 for the paper's ``samark`` and the key's own cells
    # (``key.samark.cells``: 64 for a key made by ``samark keygen`` now, 16 for one made
    # on 2026-11-27, 0 for a key written before) for ``samark-layered``
    cells: int | None = None
    kappa: float = 30.0
    # the selection score's kappa, if not ``kappa`` (the paper uses one kappa for both): a
    # smaller one keeps tanh(kappa r_j cos_j) from saturating, so the pick keeps preferring
    # larger margins (the "margin" variant in docs/parameters.md). Detection uses ``kappa``
    generation_kappa: float | None = None
    # what the selection score measures a channel's margin from: "zero" (the paper's
    # tanh(kappa r_j cos_j)) or "pool", the mean flag-signed cosine of the step's candidates
    # (tanh(kappa (r_j cos_j - mean))). Once the text's topic has carried the pool to the
    # flag side, the paper's terms saturate and the pick stops preferring larger margins;
    # "pool" keeps the first step's pressure at every step (docs/parameters.md)
    margin_reference: MarginReference = "zero"
    # with keyed cells: weigh each candidate's watermark score by the chance that its
    # sentence stays in its cell when paraphrased, Phi(margin / cell_margin_sd), where the
    # margin is its cosine to its cell's anchor minus that to the runner-up's (a sentence
    # that leaves its cell under paraphrase is scored on another cell's pivots and carries
    # no evidence); None: off (the default). 0.016 is the margin's measured move under
    # paraphrase (docs/results/2026-11-28-cost, "A cell-aware pick")
    cell_margin_sd: float | None = None
    # candidate sampling
    candidates: int = 64
    temperature: float = 0.7
    top_p: float = 0.95
    max_sentence_tokens: int = 64
    max_new_sentences: int = 12
    # selection
    epsilon: float = 10.0
    lambda_div: float = 0.35
    lambda_nov: float = 0.2
    theta_sem: float = 0.8
    theta_ngram: float = 0.4
    ngram_n: int = 4
    ngram_filter: bool = True
    semantic_filter: bool = True
    tanh_generation: bool = True
    # when no candidate survives: draw up to this many extra batches, then fall back
    extra_batches: int = 1
    # adaptive budget (off = the paper's fixed N): draw ``adaptive_chunk`` candidates at a
    # time; stop once ``adaptive_matches`` matches are saturated (every channel's
    # tanh(kappa r_j cos_j) >= ``adaptive_saturation``), or, after ``adaptive_patience``
    # candidates, once any candidate matches; never beyond the fixed-N budget
    adaptive: bool = False
    adaptive_chunk: int = 8
    adaptive_matches: int = 1
    adaptive_saturation: float = 0.3
    adaptive_patience: int = 16
    # semantic steering (docs/parameters.md, "Budget: pruning, steering and stopping"): a
    # logit bias of this strength on whole-word tokens that lean toward the step's flag region
    # (0: off, the paper); the ``steer_words`` most frequent whole-word tokens are
    # embedded once per generator
    steer: float = 0.0
    steer_words: int = 8000
    # row pruning (the same section): once the candidates have decoded ``prune_at``
    # tokens, only the ``prune_keep`` rows whose partial text scores best against the
    # pivots decode on (0: off, the paper). A departure from Alg. 1: the pick is among
    # those rows and the ones that ended a sentence earlier
    prune_at: int = 0
    prune_keep: int = 4
    # research records: each step also records where its margin came from (the pool's and
    # the chosen sentence's flag-signed cosines, the running text's topic offset). They
    # derive from the secret pivots and flags, so only experiments turn this on; it changes
    # no choice
    record_signal: bool = False
    # a payload in the flag pattern (docs/operators.md, "Payload"): flag j + 1 is flag 1
    # times payload_flags[j] (+1: the same sign, -1: the opposite); flag 1, and the flags
    # after the payload's, are drawn per generation (Alg. 1). Detection infers the flags by
    # majority vote, so its p-value is the same, and reads the payload from their relative
    # signs. Flag 1 stays random so that the texts of one payload value still lean to
    # opposite sides and their mean gives nothing away (absolute flags would: measured)
    payload_flags: tuple[int, ...] = ()
    # detection
    tanh_detection: bool = True
    # the product's statistic, the one every door (Python, CLI, server, rings) detects with:
    # the scan keeps its power when human sentences are mixed in and loses little elsewhere,
    # at the same exact FPR (docs/statistics.md). The paper's z (Alg. 2) is the scheme's
    # "paper" preset (SAMark.presets), which the experiments' rows start from
    statistic: Statistic = "scan"
    n_null: int = 999
    null_seed: int = 0
    # with keyed cells, the public null draws texts are detected against: "full"
    # (d-dimensional cell sets), "projected" (their exact law in each text's span,
    # samark.schemes.samark.null_projection: a 64-key ring in seconds), or None: what the
    # key names ("projected" for a key written since 2026-11-28, "full" before). Another
    # setting than the key's gives its texts other p-values (as exact): a research knob
    null_draws: str | None = None
    # sequential null draws (Besag and Clifford): with draws in each text's span, a text's
    # draws stop once every key's statistic has been reached this many times, and its
    # p-values are the sequential ones (valid; equal to the fixed ones below h / n_null).
    # Unmarked text costs a few blocks of draws instead of all: a 1,000-key ring's human
    # text in a fraction of a second. None: every draw (the recorded p-values)
    null_stop: int | None = None
    alpha: float = 0.01
    # topic centring at detection (samark.schemes.samark.topic_centring): a reference
    # file built from the operator's own human text (``samark centring build``), or None
    # (the paper: none)
    centring: str | None = None

    def __post_init__(self) -> None:
        check(self.channels >= 1, "channels must be >= 1")
        check(
            self.null_draws is None or self.null_draws in NULL_DRAWS,
            f"null_draws must be one of {NULL_DRAWS} (or None: the key's)",
        )
        check(
            self.null_stop is None or self.null_stop >= 1,
            "null_stop must be at least 1 (or None: every null draw)",
        )
        if self.cells is not None:
            check_cells(self.cells)
        check(self.kappa > 0, "kappa must be > 0")
        check(
            self.generation_kappa is None or self.generation_kappa > 0,
            "generation_kappa must be > 0 (or None: the detection kappa)",
        )
        check(
            self.margin_reference in MARGIN_REFERENCES,
            f"margin_reference must be one of {MARGIN_REFERENCES}",
        )
        check(self.candidates >= 1, "candidates must be >= 1")
        check(self.max_new_sentences >= 1, "max_new_sentences must be >= 1")
        check(self.epsilon > 0, "epsilon must be > 0")
        check(self.lambda_div >= 0 and self.lambda_nov >= 0, "lambda weights must be >= 0")
        check(0 < self.theta_sem <= 1, "theta_sem must be in (0, 1]")
        check(0 < self.theta_ngram <= 1, "theta_ngram must be in (0, 1]")
        check(self.ngram_n >= 1, "ngram_n must be >= 1")
        check(self.extra_batches >= 0, "extra_batches must be >= 0")
        check(self.adaptive_chunk >= 1, "adaptive_chunk must be >= 1")
        check(self.adaptive_matches >= 1, "adaptive_matches must be >= 1")
        check(0 <= self.adaptive_saturation < 1, "adaptive_saturation must be in [0, 1)")
        check(
            self.cell_margin_sd is None or self.cell_margin_sd > 0,
            "cell_margin_sd must be positive (or None: off)",
        )
        check(self.adaptive_patience >= 1, "adaptive_patience must be >= 1")
        check(self.steer >= 0, "steer must be >= 0")
        check(self.steer_words >= 16, "steer_words must be >= 16")
        check(self.prune_at >= 0, "prune_at must be >= 0 (0: no pruning)")
        check(self.prune_keep >= 1, "prune_keep must be >= 1")
        object.__setattr__(self, "payload_flags", tuple(self.payload_flags))
        check(
            all(f in (-1, 1) for f in self.payload_flags),
            "payload_flags must be signs, +1 or -1",
        )
        check(
            len(self.payload_flags) < self.channels,
            f"payload_flags sets at most channels - 1 ({self.channels - 1}) flags",
        )
        self.refuse_what_cells_cannot_do(self.cells or 0)
        check(self.statistic in STATISTICS, f"statistic must be one of {STATISTICS}")
        check(self.n_null >= 19, "n_null must be >= 19")
        check(0 < self.alpha < 1, "alpha must be in (0, 1)")
        check(
            self.centring is None or (isinstance(self.centring, str) and bool(self.centring)),
            "centring must be the path of a centring reference file (or None)",
        )
        _ = self.sampling  # validates temperature, top_p, max_sentence_tokens

    def refuse_what_cells_cannot_do(self, cells: int) -> None:
        """Refuse what keyed cells cannot do, with ``cells`` the scheme's resolved value
        (the key's, where ``cells`` is None)."""
        if cells:
            how = f"{cells} keyed cells" + (" (the key's)" if self.cells is None else "")
            check(not self.payload_flags, f"payload_flags needs static pivots, not {how}: cells=0")
            check(self.steer == 0, f"steer needs static pivots, not {how}: cells=0")
            check(self.prune_at == 0, f"prune_at needs static pivots, not {how}: cells=0")
            check(
                self.margin_reference == "zero",
                f"margin_reference 'pool' needs static pivots, not {how}: cells=0",
            )
        else:
            check(self.cell_margin_sd is None, "cell_margin_sd needs keyed cells (cells >= 2)")

    @property
    def selection_kappa(self) -> float:
        """The kappa of the selection score: ``generation_kappa``, else ``kappa``."""
        return self.kappa if self.generation_kappa is None else self.generation_kappa

    @property
    def selection(self) -> SelectionRule:
        """The selection part of this config: what :func:`~samark.schemes.samark.selection.select`
        reads at each step."""
        return SelectionRule(
            kappa=self.selection_kappa,
            epsilon=self.epsilon,
            lambda_div=self.lambda_div,
            lambda_nov=self.lambda_nov,
            theta_sem=self.theta_sem,
            theta_ngram=self.theta_ngram,
            ngram_n=self.ngram_n,
            ngram_filter=self.ngram_filter,
            semantic_filter=self.semantic_filter,
            use_tanh=self.tanh_generation,
            saturation=self.adaptive_saturation,
            margin_reference=self.margin_reference,
        )

    @property
    def sampling(self) -> SamplingParams:
        return SamplingParams(self.temperature, self.top_p, self.max_sentence_tokens)

    @classmethod
    def dagger(cls, **overrides: Any) -> SAMarkConfig:
        """SAMark-dagger: diversity-aware filtering and soft regularisation all off
        (the paper's "All Off" ablation row)."""
        return cls(**{**cls.DAGGER, **overrides})
