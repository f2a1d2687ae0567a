"""Moved to :mod:`samark.detection.key_check`; this name keeps working for earlier imports."""

from samark.detection.key_check import *  # noqa: F403
