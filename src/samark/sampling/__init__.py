"""Candidate samplers: the interface and its engines."""

from samark.sampling.base import Candidate, CandidateBatch, CandidateSampler, SamplingParams

__all__ = ["Candidate", "CandidateBatch", "CandidateSampler", "SamplingParams"]
