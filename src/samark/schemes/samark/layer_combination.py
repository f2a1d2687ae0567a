"""The layered mark's one p-value from its two layers' (semantic and token) p-values:
Fisher's combination (the default), the Cauchy combination, or ``both`` (the larger: a
text must carry both layers); either layer at ``contradiction`` or above wins outright
(docs/statistics.md). The two layers' sub-keys are independent, so under H0 the two
p-values are independent and each combination is exact."""

from __future__ import annotations

import math
from typing import Literal

from scipy.stats import norm

Combine = Literal["fisher", "cauchy", "both"]
COMBINES: tuple[str, ...] = ("fisher", "cauchy", "both")


def fisher_two(p1: float, p2: float) -> float:
    """Fisher's combination of two independent p-values: P(chi2_4 >= -2 ln(p1 p2)),
    in closed form ``x (1 - ln x)`` with ``x = p1 p2``."""
    x = p1 * p2
    if x <= 0.0:
        return 0.0
    return min(1.0, x * (1.0 - math.log(x)))


def cauchy_two(p1: float, p2: float) -> float:
    """The Cauchy combination (Liu and Xie 2020) of two independent p-values: the mean of
    ``tan((1/2 - p) pi)``, a standard Cauchy variable for each uniform p, is itself
    standard Cauchy, so its tail is exact. It behaves like twice the smaller p-value when
    one layer is destroyed, where Fisher's pays for the destroyed layer."""
    t = 0.5 * sum(1.0 / math.tan(math.pi * min(max(p, 1e-300), 1.0 - 1e-16)) for p in (p1, p2))
    return math.atan(1.0 / t) / math.pi if t > 0 else 0.5 - math.atan(t) / math.pi


def combine_p_values(
    p_semantic: float, p_token: float, *, method: Combine = "fisher", contradiction: float = 0.99
) -> float:
    """The layered mark's one p-value from its two layers' p-values (module docstring)."""
    if method == "both":
        return max(p_semantic, p_token)
    if max(p_semantic, p_token) >= contradiction:
        return max(p_semantic, p_token)
    if method == "cauchy":
        return cauchy_two(p_semantic, p_token)
    return fisher_two(p_semantic, p_token)


def combined_z(p: float) -> float:
    """The layered detection's ``z``: the normal quantile of its combined p-value, kept
    finite (p = 1 after a contradiction would give -inf, which no record can hold)."""
    return float(norm.isf(min(max(p, 1e-300), 1.0 - 1e-16)))
