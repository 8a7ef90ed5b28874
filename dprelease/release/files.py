"""The format of a release directory: kinds, file names, table columns and the ledger's
mechanism names that the writer produces and the verifier checks.

Dependency-free on purpose: the writer (`release.writer` and the kinds' pipelines) and the
verifier (`dprelease.verify`, which must not import the tooling that produced a release)
both import it, so they cannot disagree about what a release holds.
"""

from __future__ import annotations

# Every kind
MANIFEST_FILE = "manifest.json"
LEDGER_FILE = "ledger.parquet"
REPORT_FILE = "report.md"
# The status of a ledger entry as `ledger.parquet` publishes it: committed (its run committed
# what it spent) or not committed (reserved by a run that has not committed: running, or
# stopped after touching the data; charged in full either way). Why a run did not commit is
# not published: a failure after the data was read may depend on the data.
COMMITTED = "committed"
NOT_COMMITTED = "not committed"

# DP synthetic data (the main paper's release)
SYNTHETIC = "synthetic"
SYNTHETIC_FILE = "synthetic.parquet"
DIAGNOSTICS_FILE = "diagnostics.json"
# Great Expectations' validation of synthetic.parquet against the public schema's suite
# (`dprelease.expectations`), when the gx extra is installed; its summary is the manifest's
# `EXPECTATIONS_KEY`.
EXPECTATIONS_FILE = "expectations.json"
EXPECTATIONS_KEY = "expectations"
WEIGHTS_FIGURE = "weights.png"
WEIGHT_COLUMNS = ("weight", "log_weight")

# Adaptive-truncation posterior (Yildirim 2023)
TRUNCATION = "adaptive-truncation"
TRANSCRIPT_FILE = "transcript.parquet"
TRUNCATION_POSTERIOR_FILE = "posterior.parquet"
TRAJECTORY_FILE = "trajectory.parquet"
DESIGN_FILE = "design.json"
TRAJECTORY_FIGURE = "trajectory.png"
TRANSCRIPT_COLUMNS = ("t", "l", "r", "noise_scale", "y", "thompson_mu", "thompson_sigma")
TRAJECTORY_COLUMNS = (
    "t",
    "mu_mean",
    "mu_sd",
    "mu_q05",
    "mu_q50",
    "mu_q95",
    "sigma_mean",
    "sigma_sd",
    "sigma_q05",
    "sigma_q50",
    "sigma_q95",
    "ess",
)
TRUNCATION_MECHANISM = "adaptive_truncation_laplace"

# ABCDP posterior samples (Park et al. 2021)
ABCDP = "abcdp"
ABCDP_POSTERIOR_FILE = "posterior.parquet"
DRAWS_FILE = "draws.parquet"
FLIP_FIGURE = "flip_probability.png"
ABCDP_POSTERIOR_FIGURE = "posterior.png"
SVT_MECHANISM = "abcdp_svt"
SVT_VARIANTS = {False: "lyu17-alg1", True: "dwork-roth-sparse"}

# A Laplace count of the real rows (adaptive truncation's T, ABCDP's normaliser n_hat)
COUNT_MECHANISM = "dp_row_count"
