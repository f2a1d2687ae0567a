"""Moved to :mod:`samark.keys.check`; this name keeps working for earlier imports."""

from samark.keys.check import *  # noqa: F403
