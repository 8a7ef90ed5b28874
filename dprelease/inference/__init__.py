"""Differentially private Bayesian inference release kinds (adaptive truncation, ABCDP)."""
