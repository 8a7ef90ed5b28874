"""Pareto-smoothed importance sampling (Vehtari et al. 2024).

- `smoothing`: PSIS of one or many vectors of log weights (`psis`, `PsisResult`);
- `tail`: how many of the largest weights form the tail;
- `pareto_fit`: the generalised Pareto fit of the tail.
"""

from dprelease.diagnostics.psis.smoothing import PsisResult, normalised_weights, psis

__all__ = ["PsisResult", "normalised_weights", "psis"]
