"""Moved to :mod:`samark.schemes.samark.layered` (SAMark's package); this name keeps
working for earlier imports."""

from samark.schemes.samark.layered import (
    SAMarkLayered,
    cauchy_two,
    combine_p_values,
    combined_z,
    fisher_two,
)

__all__ = ["SAMarkLayered", "cauchy_two", "combine_p_values", "combined_z", "fisher_two"]
