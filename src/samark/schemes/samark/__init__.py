"""SAMark, the self-anchored sentence-level watermark (the paper's Alg. 1 and 2), in one
home:

- ``scheme``: the scheme (generation through the shared sentence loop, detection) and its
  registration as ``samark`` and ``samark-dagger``;
- ``config``: :class:`SAMarkConfig`, every knob, validated, in parts (generation,
  selection, detection and the research extension); ``presets/``: its presets, as data;
- ``selection``: Alg. 1's hard filters, scores and softmax pick;
- ``steering``: the optional semantic steering (off by default);
- ``detector``: Alg. 2 (segment, embed, majority-vote flags, tanh alignment, statistic);
- ``statistics``: the statistics and their exact p-values;
- ``ring``: a keyring's max-statistic pass (every key on one embedding);
- ``layered``: the layered mark (SAMark plus a token layer) and its ring pass.

- ``cells``, ``cell_pass``, ``null_projection``: the layered mark's keyed cells, their
  scoring pass and the exact law of their null draws in a text's span;
- ``pivot_space_fitting``: fitting a pivot space to human text (the shipped spaces);
- ``topic_centring``: the detector's optional topic centring by an operator's human text.

A key's pivots, their public law and pivot spaces are key material, one floor down in
:mod:`samark.keys` (``key.samark``); the layered mark's
token layer is :mod:`samark.token_layer`.
"""

from samark.schemes.samark.config import (
    SAMarkConfig,
    SAMarkDetection,
    SAMarkGeneration,
    SAMarkResearch,
    SAMarkSelection,
)
from samark.schemes.samark.detector import SAMarkDetector
from samark.schemes.samark.scheme import SAMark

__all__ = [
    "SAMark",
    "SAMarkConfig",
    "SAMarkDetection",
    "SAMarkDetector",
    "SAMarkGeneration",
    "SAMarkResearch",
    "SAMarkSelection",
]
