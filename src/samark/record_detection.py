"""Moved to :mod:`samark.detection.records`; this name keeps working for earlier imports."""

from samark.detection.records import *  # noqa: F403
