"""Every built-in scheme: the module it lives in and what it is, known without importing
it. ``import samark``, ``samark --help`` and ``samark schemes list`` therefore load no
torch; a scheme's module is imported when the scheme is first built. A new scheme is one
module (whose class, or factory, says ``@register_scheme("name")``) plus one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from samark.schemes.options import SAMARK_OPTIONS, SchemeOption


@dataclass(frozen=True)
class SchemeInfo:
    """What the registry says of a scheme without building it (no key, no model)."""

    name: str
    #: what its detector scores and ``Detection.n_units`` counts
    unit: str
    description: str
    #: changes of what the scheme writes or scores under unchanged parameters (the token
    #: rows' last: 2026-11-26, they write through the candidate engine)
    revision: int = 0
    #: False for a row that only writes (the unwatermarked reference): no key, no detector
    detectable: bool = True
    #: modules it needs beyond samark's own dependencies, to write and to detect (an extra)
    requires: tuple[str, ...] = ()
    #: the engines it writes through, its default first: "transformers" (local),
    #: "vllm" (in-process vLLM), "openai" (an OpenAI-compatible completions server)
    #: (:mod:`samark.sampling.catalog`). A scheme that chooses among candidates also
    #: draws them from any other registered engine that declares ``engine_needs``
    engines: tuple[str, ...] = ("transformers",)
    #: the engine abilities it needs (``EngineAbilities`` fields): ``token_layer`` for
    #: the layered mark, ``logits_processors`` for a token watermark
    engine_needs: tuple[str, ...] = ()
    # -- capabilities: what every surface (CLI, server, rings) asks instead of a name --
    #: chooses each sentence among N candidates of an engine: takes SAMark's generation
    #: options (``candidates``, an ``engine``, an upstream server)
    candidates: bool = False
    #: the detection statistics it can be asked for (``statistic``)
    statistics: tuple[str, ...] = ()
    #: its detector scores sentence embeddings against the key's pivots (SAMark's
    #: family): it takes a centring reference (``centring``) and keyed semantic cells
    #: (``cells``), and scores a file's records on Ray (``samark detect --ray``)
    pivot_detector: bool = False
    #: can carry payload bits in its flag pattern (a keyring's ``--flag-bits``)
    payload_flags: bool = False
    #: the registered name of its ablation (``samark generate --dagger``), if it has one
    ablation: str | None = None
    #: its public options (:mod:`samark.schemes.options`): what every surface offers and
    #: refuses, with their help
    options: tuple[SchemeOption, ...] = ()

    #: defaults changed since experiments began, as (field, old, new): an experiment row
    #: that leaves the field out takes the new one and so gets a new fingerprint, and a row
    #: that names the old one keeps the records it had when it left it out
    #: (``samark.evaluation.fingerprints.fingerprint_params``)
    changed_defaults: tuple[tuple[str, object, object], ...] = ()

    def option(self, name: str) -> SchemeOption | None:
        """Its declared option ``name`` (None: it takes none of that name)."""
        return next((o for o in self.options if o.name == name), None)

    def available(self) -> bool:
        """Whether the modules it needs are installed (found without importing them)."""
        import importlib.util

        return all(importlib.util.find_spec(m) is not None for m in self.requires)


#: the scheme a new key is made for (``samark keygen``, a new keyring, the demo): the
#: product's mark
DEFAULT_SCHEME = "samark-layered"

_S = "samark.schemes."


class _Capabilities(TypedDict):
    """What a family of schemes shares of its :class:`SchemeInfo`."""

    candidates: bool
    statistics: tuple[str, ...]
    pivot_detector: bool
    payload_flags: bool
    options: tuple[SchemeOption, ...]


#: what SAMark's family can do (samark, samark-dagger, samark-layered)
_SAMARK_CAPABILITIES: _Capabilities = {
    "candidates": True,
    "statistics": ("z", "alignment", "scan"),
    "pivot_detector": True,
    "payload_flags": True,
    "options": SAMARK_OPTIONS,
}
#: name -> (module, what it is)
CATALOG: dict[str, tuple[str, SchemeInfo]] = {
    info.name: (module, info)
    for module, info in [
        (
            _S + "samark",
            SchemeInfo(
                "samark",
                "sentence",
                "SAMark: self-anchored sentence-level watermark (this project's paper); exact "
                "key-exchangeability p-value",
                engines=("transformers", "vllm", "openai"),
                ablation="samark-dagger",
                **_SAMARK_CAPABILITIES,
            ),
        ),
        (
            _S + "samark",
            SchemeInfo(
                "samark-dagger",
                "sentence",
                "SAMark without the diversity terms and hard filters (the paper's ablation)",
                engines=("transformers", "vllm", "openai"),
                **_SAMARK_CAPABILITIES,
            ),
        ),
        (
            _S + "samark.layered",
            SchemeInfo(
                "samark-layered",
                "sentence",
                "SAMark plus a keyed 4-token-context green-list token layer sampled inside "
                "the candidate engine; one exact p-value (Fisher over both layers, scan "
                "statistic)",
                engines=("transformers", "vllm"),
                # N = 32 since 2026-12-05 (issue 63)
                changed_defaults=(("candidates", 64, 32),),
                engine_needs=("token_layer",),
                **_SAMARK_CAPABILITIES,
            ),
        ),
        (
            _S + "kgw",
            SchemeInfo(
                "kgw",
                "token",
                "KGW green list (Kirchenbauer et al. 2023), transformers' own; z-test p-value",
                revision=2,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "synthid",
            SchemeInfo(
                "synthid",
                "token",
                "SynthID-Text tournament sampling (Dathathri et al. 2024), transformers' own; "
                "exact binomial p-value on the g-values",
                revision=2,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "unigram",
            SchemeInfo(
                "unigram",
                "token",
                "Unigram-Watermark (Zhao et al. 2023): one fixed green list; exact "
                "hypergeometric p-value on distinct tokens",
                revision=1,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "morphmark",
            SchemeInfo(
                "morphmark",
                "token",
                "MorphMark (Wang et al. 2025): KGW green lists, strength adapted to the green "
                "mass; KGW's z-test",
                revision=1,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "exp",
            SchemeInfo(
                "exp",
                "token",
                "EXP (Aaronson 2022): Gumbel-max sampling keyed by the last 4 tokens; exact "
                "Gamma p-value",
                revision=1,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "upv",
            SchemeInfo(
                "upv",
                "token",
                "UPV (Liu et al. 2024): green lists from a small network trained from the key, "
                "threshold set on reference text; key-based z-test (the public LSTM detector "
                "is not built)",
                revision=1,
                engine_needs=("logits_processors",),
            ),
        ),
        (
            _S + "vllm_gumbel",
            SchemeInfo(
                "vllm-gumbel",
                "token",
                "vLLM's own watermark: Gumbel-max sampling keyed by the last 4 generated "
                "tokens, written through vLLM and detected by its GumbelWatermarkDetector; "
                "exact Gamma p-value (needs vLLM)",
                requires=("vllm",),
                engines=("vllm",),
            ),
        ),
        (
            _S + "semstamp",
            SchemeInfo(
                "semstamp",
                "sentence",
                "SemStamp (Hou et al. 2024): LSH regions of the embedding space, rejection "
                "sampling with a margin; exact p-value over keys",
            ),
        ),
        (
            _S + "semstamp",
            SchemeInfo(
                "k-semstamp",
                "sentence",
                "k-SemStamp (Hou et al. 2024): k-means regions fitted on human text, "
                "rejection sampling with a margin; exact p-value over keys",
            ),
        ),
        (
            _S + "pmark",
            SchemeInfo(
                "pmark",
                "sentence",
                "PMark online (Huo et al. 2026): per-step key bits, candidate-median "
                "halving over 4 channels; detection re-samples; exact binomial p-value over "
                "keys",
            ),
        ),
        (
            _S + "lm_generate",
            SchemeInfo(
                "unwatermarked",
                "token",
                "the generator's own nucleus sampling: the reference row, no detector",
                revision=2,
                engine_needs=("logits_processors",),
                detectable=False,
            ),
        ),
    ]
}


def option_help(name: str) -> str:
    """The help of option ``name`` as its schemes declare it, naming which catalogued
    schemes take it (what a command line shows, built from the declarations)."""
    takers = [info.name for _, info in CATALOG.values() if info.option(name) is not None]
    if not takers:
        raise KeyError(f"no catalogued scheme declares the option {name!r}")
    option = CATALOG[takers[0]][1].option(name)
    assert option is not None
    return f"{option.help} Schemes: {', '.join(takers)}."
