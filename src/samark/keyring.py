"""Moved to :mod:`samark.keys.ring`; this name keeps working for earlier imports."""

from samark.keys.ring import *  # noqa: F403
