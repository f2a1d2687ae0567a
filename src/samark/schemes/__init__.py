"""Watermarking schemes behind one interface, by name. Each scheme's module is imported
when the scheme is first built (:mod:`samark.schemes.catalog`), so importing this package
loads no model library."""

from samark.schemes.base import Generation, Watermark, create_scheme, register_scheme, scheme_names
from samark.schemes.samark import SAMark

__all__ = ["Generation", "SAMark", "Watermark", "create_scheme", "register_scheme", "scheme_names"]
