"""Online DP Bayesian estimation with adaptive truncation (Yildirim, Yildirim 2023)."""
