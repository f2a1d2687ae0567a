"""Moved to :mod:`samark.detection.ring`; this name keeps working for earlier imports."""

from samark.detection.ring import *  # noqa: F403
