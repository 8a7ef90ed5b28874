"""Verification checks of an "adaptive-truncation" release (registered into `KIND_CHECKS`).

The release (docs/adaptive-truncation.md section 6.5) holds `transcript.parquet` (one row per
processed row: t, l, r, noise_scale, y and the Thompson draw), `posterior.parquet` (equally weighted
draws of mu and sigma), `trajectory.parquet` (posterior summaries per step) and `design.json`. They
are checked against the manifest, the public schema and the release's own ledger entries only:

- `truncation-files`: the four files are listed in the manifest.
- `truncation-ledger`: this release's one `adaptive_truncation_laplace` entry exists, names
  the manifest's column, and its epsilon is the manifest's epsilon plus the DP count's (one
  entry with their joint cost); its `n_steps` is T.
- `transcript-shape`: exactly the transcript columns, T rows (the manifest's `n_steps`),
  t = 1..T, every value finite.
- `transcript-intervals`: lo <= l_t < r_t <= hi with [lo, hi] the column's schema bounds.
- `transcript-noise-scale`: noise_scale_t = (r_t - l_t) / epsilon for every t (relative
  1e-9): each row entered a Laplace release calibrated to its interval's width, the
  mechanism's privacy condition (the author's code used a scale sqrt(2) smaller).
- `posterior-draws`: columns mu and sigma, finite, sigma > 0, at least one draw.
- `trajectory`: T rows, t = 1..T, 5 % <= 50 % <= 95 % quantiles.
- `design`: `design.json` equals the manifest's design and its epsilon is the release's.
(`no-row-count`, that no manifest field is named like a real row count, is a common check of
`dprelease.verify.release` for every kind.)
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from dprelease.release.files import (
    DESIGN_FILE,
    LEDGER_FILE,
    TRAJECTORY_COLUMNS,
    TRAJECTORY_FILE,
    TRANSCRIPT_COLUMNS,
    TRANSCRIPT_FILE,
    TRUNCATION_MECHANISM,
)
from dprelease.release.files import TRUNCATION as KIND
from dprelease.release.files import TRUNCATION_POSTERIOR_FILE as POSTERIOR_FILE
from dprelease.verify.release import KIND_CHECKS, Check, read_parquet

SCALE_RTOL = 1e-9


def truncation_checks(directory: Path, manifest: dict) -> list[Check]:
    """Every check of the module docstring, in order."""
    files = (TRANSCRIPT_FILE, POSTERIOR_FILE, TRAJECTORY_FILE, DESIGN_FILE)
    missing = [name for name in files if name not in manifest["files"]]
    if missing:
        return [Check("truncation-files", False, f"missing: {', '.join(missing)}")]
    checks = [Check("truncation-files", True, "transcript, posterior, trajectory, design")]
    epsilon = float(manifest["epsilon"])
    n_steps = int(manifest["n_steps"])
    column = manifest["column"]
    checks.append(_ledger(directory, manifest, epsilon, n_steps, column))
    transcript = read_parquet(directory / TRANSCRIPT_FILE).to_pydict()
    checks += _transcript(transcript, n_steps, epsilon, manifest["schema"]["columns"][column])
    checks.append(_posterior(read_parquet(directory / POSTERIOR_FILE).to_pydict()))
    checks.append(_trajectory(read_parquet(directory / TRAJECTORY_FILE).to_pydict(), n_steps))
    checks.append(_design(directory, manifest, epsilon))
    return checks


def _ledger(directory: Path, manifest: dict, epsilon: float, n_steps: int, column: str) -> Check:
    rows = read_parquet(directory / LEDGER_FILE).to_pylist()
    mine = [
        r
        for r in rows
        if r["release_id"] == manifest["release_id"] and r["mechanism"] == TRUNCATION_MECHANISM
    ]
    if len(mine) != 1:
        return Check("truncation-ledger", False, f"{len(mine)} {TRUNCATION_MECHANISM} entries")
    entry = mine[0]
    params = entry["params"]
    params = json.loads(params) if isinstance(params, str) else params
    problems = []
    # One entry holds the transcript's epsilon plus the DP count's, if T came from one: their
    # privacy proof is joint (`inference.truncation.privacy`).
    joint = epsilon + float(manifest.get("configuration", {}).get("count_epsilon") or 0.0)
    if not math.isclose(entry["epsilon"], joint, rel_tol=1e-12):
        problems.append(f"epsilon {entry['epsilon']} != {joint}")
    if params.get("n_steps") != n_steps:
        problems.append(f"n_steps {params.get('n_steps')} != {n_steps}")
    if params.get("column") != column:
        problems.append(f"column {params.get('column')!r} != {column!r}")
    if problems:
        return Check("truncation-ledger", False, "; ".join(problems))
    return Check("truncation-ledger", True, f"epsilon={epsilon:g}, T={n_steps}, column {column}")


def _transcript(table: dict, n_steps: int, epsilon: float, spec: dict) -> list[Check]:
    if list(table) != list(TRANSCRIPT_COLUMNS):
        return [Check("transcript-shape", False, f"columns {list(table)}")]
    values = {name: np.asarray(table[name], dtype=float) for name in TRANSCRIPT_COLUMNS}
    if len(values["t"]) != n_steps or not np.array_equal(values["t"], np.arange(1, n_steps + 1)):
        return [Check("transcript-shape", False, f"t is not 1..{n_steps}")]
    if not all(np.isfinite(v).all() for v in values.values()):
        return [Check("transcript-shape", False, "non-finite values")]
    checks = [Check("transcript-shape", True, f"{n_steps} releases")]
    lo, hi, left, right = float(spec["min"]), float(spec["max"]), values["l"], values["r"]
    inside = (lo <= left) & (left < right) & (right <= hi)
    checks.append(
        Check("transcript-intervals", True, f"every interval inside [{lo:g}, {hi:g}]")
        if inside.all()
        else Check("transcript-intervals", False, f"{int((~inside).sum())} intervals outside")
    )
    expected = (right - left) / epsilon
    wrong = ~np.isclose(values["noise_scale"], expected, rtol=SCALE_RTOL, atol=0.0)
    checks.append(
        Check("transcript-noise-scale", False, f"{int(wrong.sum())} scales != (r - l)/epsilon")
        if wrong.any()
        else Check("transcript-noise-scale", True, "every scale is (r_t - l_t)/epsilon")
    )
    return checks


def _posterior(table: dict) -> Check:
    if set(table) != {"mu", "sigma"}:
        return Check("posterior-draws", False, f"columns {sorted(table)}")
    mu, sigma = np.asarray(table["mu"], float), np.asarray(table["sigma"], float)
    if len(mu) == 0 or not (np.isfinite(mu).all() and np.isfinite(sigma).all()):
        return Check("posterior-draws", False, "empty or non-finite draws")
    if (sigma <= 0).any():
        return Check("posterior-draws", False, "sigma draws must be positive")
    return Check("posterior-draws", True, f"{len(mu)} draws of (mu, sigma)")


# The trajectory's columns before it carried the posterior medians: such releases still verify.
WITHOUT_MEDIANS = tuple(c for c in TRAJECTORY_COLUMNS if not c.endswith("_q50"))


def _trajectory(table: dict, n_steps: int) -> Check:
    if list(table) not in (list(TRAJECTORY_COLUMNS), list(WITHOUT_MEDIANS)):
        return Check("trajectory", False, f"columns {list(table)}")
    t = np.asarray(table["t"], dtype=float)
    if not np.array_equal(t, np.arange(1, n_steps + 1)):
        return Check("trajectory", False, f"t is not 1..{n_steps}")
    quantiles = ("05", "50", "95") if "mu_q50" in table else ("05", "95")
    for name in ("mu", "sigma"):
        columns = [np.asarray(table[f"{name}_q{q}"]) for q in quantiles]
        if any((low > high).any() for low, high in zip(columns, columns[1:], strict=False)):
            return Check("trajectory", False, f"{name}: quantiles 5 % <= 50 % <= 95 % violated")
    return Check("trajectory", True, f"{n_steps} steps")


def _design(directory: Path, manifest: dict, epsilon: float) -> Check:
    design = json.loads((directory / DESIGN_FILE).read_text())
    if design != manifest.get("design"):
        return Check("design", False, "design.json differs from the manifest's design")
    if not math.isclose(float(design.get("epsilon", math.nan)), epsilon, rel_tol=1e-12):
        return Check("design", False, "designed for another epsilon")
    return Check("design", True, f"[a*, b*] = [{design['a']}, {design['b']}]")


KIND_CHECKS[KIND] = truncation_checks
