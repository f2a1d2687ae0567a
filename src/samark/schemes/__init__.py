"""Watermarking schemes behind one interface, by name."""

from samark.schemes import (  # noqa: F401  (register schemes)
    exp,
    kgw,
    lm_generate,
    morphmark,
    pmark,
    samark_layered,
    semstamp,
    synthid,
    unigram,
    upv,
)
from samark.schemes.base import Generation, Watermark, create_scheme, register_scheme, scheme_names
from samark.schemes.samark import SAMark

__all__ = ["Generation", "SAMark", "Watermark", "create_scheme", "register_scheme", "scheme_names"]
