"""Diagnostics for importance-weighted synthetic data (numpy/scipy only)."""

from dprelease.diagnostics.psis import PsisResult, normalised_weights, psis

__all__ = ["PsisResult", "normalised_weights", "psis"]
