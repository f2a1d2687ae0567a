"""Moved to :mod:`samark.detection.ray`; this name keeps working for earlier imports."""

from samark.detection.ray import *  # noqa: F403
