"""Diagnostics for importance-weighted synthetic data (numpy/scipy only)."""

from dprelease.diagnostics.gate import diagnose_weights, require_reliable
from dprelease.diagnostics.psis.smoothing import PsisResult, normalised_weights, psis

__all__ = ["PsisResult", "diagnose_weights", "normalised_weights", "psis", "require_reliable"]
