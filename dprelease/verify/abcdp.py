"""Verification checks of an "abcdp" release (registered into `KIND_CHECKS`).

The release (docs/abcdp.md section 7.6) holds `posterior.parquet` (one row per accepted sample: the
model's parameters and `draw_index`) and `draws.parquet` (every tested prior draw with its DP
indicator `accepted`). Checked against the manifest and the release's own ledger entries:

- `abcdp-files`: both files are listed in the manifest.
- `abcdp-model`: the manifest names the model and a 64-hex sha256 of its file.
- `abcdp-ledger`: this release has exactly one `dp_row_count` and one `abcdp_svt` entry, with
  epsilon_count + epsilon_svt = the manifest's epsilon; the count's Laplace scale is
  1/epsilon_count; the SVT entry's c, resample and variant are the manifest's, and its noise
  scale is b = (c + 1)/(epsilon_svt n_hat) (no resampling) or 2c/(epsilon_svt n_hat)
  (resampling) with n_hat the manifest's DP count (Theorem 4.1 with Delta = 1/n_hat), query
  noise 2b, and the manifest's b is that b.
- `abcdp-draws`: `draws.parquet` has the parameter columns, `draw_index` = 0..t_stop-1 and a
  boolean `accepted`; at most c accepted; when fewer than c were accepted every one of the
  T draws was tested, otherwise the last tested draw is the c-th acceptance (the SVT stops).
- `abcdp-posterior`: `posterior.parquet` is exactly the accepted rows of `draws.parquet`
  (same draw indices, same parameter values) and the manifest's posterior mean is theirs.
(`no-row-count`, that no manifest field is named like a real row count, is a common check of
`dprelease.verify.release` for every kind.)
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np

from dprelease.release.files import ABCDP as KIND
from dprelease.release.files import ABCDP_POSTERIOR_FILE as POSTERIOR_FILE
from dprelease.release.files import COUNT_MECHANISM, DRAWS_FILE, LEDGER_FILE, SVT_MECHANISM
from dprelease.release.files import SVT_VARIANTS as VARIANTS
from dprelease.verify.release import KIND_CHECKS, Check, read_parquet

# the same walk over the manifest as the adaptive-truncation kind (one definition)

RTOL = 1e-9


def abcdp_checks(directory: Path, manifest: dict) -> list[Check]:
    """Every check of the module docstring, in order."""
    missing = [name for name in (POSTERIOR_FILE, DRAWS_FILE) if name not in manifest["files"]]
    if missing:
        return [Check("abcdp-files", False, f"missing: {', '.join(missing)}")]
    checks = [Check("abcdp-files", True, "posterior and draws")]
    checks.append(_model(manifest))
    checks.append(_ledger(directory, manifest))
    draws = read_parquet(directory / DRAWS_FILE).to_pydict()
    checks.append(_draws(draws, manifest))
    checks.append(_posterior(read_parquet(directory / POSTERIOR_FILE).to_pydict(), draws, manifest))
    return checks


def _model(manifest: dict) -> Check:
    model = manifest.get("model", {})
    digest = str(model.get("sha256", ""))
    if not re.fullmatch(r"[0-9a-f]{64}", digest) or not model.get("reference"):
        return Check("abcdp-model", False, "no model reference or sha256 in the manifest")
    return Check("abcdp-model", True, f"{model['reference']} sha256 {digest[:12]}...")


def _ledger(directory: Path, manifest: dict) -> Check:
    rows = [
        r
        for r in read_parquet(directory / LEDGER_FILE).to_pylist()
        if r["release_id"] == manifest["release_id"]
    ]
    count = [r for r in rows if r["mechanism"] == COUNT_MECHANISM]
    svt = [r for r in rows if r["mechanism"] == SVT_MECHANISM]
    if len(count) != 1 or len(svt) != 1 or len(rows) != 2:
        return Check(
            "abcdp-ledger", False, f"expected one count and one SVT entry, got {len(rows)}"
        )
    count, svt = count[0], svt[0]
    params = {key: _params(r) for key, r in (("count", count), ("svt", svt))}
    epsilon = float(manifest["epsilon"])
    c, resample = int(manifest["n_samples"]), bool(manifest["resample"])
    n_hat = float(manifest["dp_row_count"]["value"])
    b = (2 * c if resample else c + 1) / (svt["epsilon"] * n_hat)
    problems = []
    if not math.isclose(count["epsilon"] + svt["epsilon"], epsilon, rel_tol=RTOL):
        problems.append("count + SVT epsilon is not the manifest's epsilon")
    if not math.isclose(
        float(params["count"].get("scale", math.nan)), 1 / count["epsilon"], rel_tol=RTOL
    ):
        problems.append("count scale is not 1/epsilon_count")
    svt_params = params["svt"]
    if svt_params.get("c") != c or svt_params.get("resample") != resample:
        problems.append("SVT c/resample differ from the manifest")
    if svt_params.get("variant") != VARIANTS[resample]:
        problems.append(f"SVT variant is not {VARIANTS[resample]}")
    for key, expected in (("b", b), ("threshold_noise_scale", b), ("query_noise_scale", 2 * b)):
        if not math.isclose(float(svt_params.get(key, math.nan)), expected, rel_tol=RTOL):
            problems.append(f"SVT {key} is not {expected:.6g} (Theorem 4.1, Delta = 1/n_hat)")
    if not math.isclose(float(manifest["noise_scale"]), b, rel_tol=RTOL):
        problems.append("the manifest's noise scale is not the ledger's b")
    if problems:
        return Check("abcdp-ledger", False, "; ".join(problems))
    return Check("abcdp-ledger", True, f"count + SVT = epsilon {epsilon:g}, b = {b:.4g}")


def _draws(draws: dict, manifest: dict) -> Check:
    names = manifest["model"]["parameter_names"]
    if list(draws) != [*names, "draw_index", "accepted"]:
        return Check("abcdp-draws", False, f"columns {list(draws)}")
    t_stop, c, n_draws = (
        int(manifest["t_stop"]),
        int(manifest["n_samples"]),
        int(manifest["n_draws"]),
    )
    index = np.asarray(draws["draw_index"])
    accepted = np.asarray(draws["accepted"], dtype=bool)
    if len(index) != t_stop or not np.array_equal(index, np.arange(t_stop)):
        return Check("abcdp-draws", False, f"draw_index is not 0..{t_stop - 1}")
    n_accepted = int(accepted.sum())
    if n_accepted > c or n_accepted != int(manifest["n_accepted"]):
        return Check("abcdp-draws", False, f"{n_accepted} accepted (c = {c})")
    if n_accepted < c and t_stop != n_draws:
        return Check("abcdp-draws", False, "stopped before T with fewer than c acceptances")
    if n_accepted == c and not accepted[-1]:
        return Check("abcdp-draws", False, "draws tested after the c-th acceptance")
    values = np.asarray([draws[name] for name in names], dtype=float)
    if not np.isfinite(values).all():
        return Check("abcdp-draws", False, "non-finite parameter values")
    return Check("abcdp-draws", True, f"{t_stop} draws tested, {n_accepted} accepted")


def _posterior(posterior: dict, draws: dict, manifest: dict) -> Check:
    names = manifest["model"]["parameter_names"]
    if list(posterior) != [*names, "draw_index"]:
        return Check("abcdp-posterior", False, f"columns {list(posterior)}")
    chosen = np.asarray(draws["accepted"], dtype=bool)
    expected_index = np.asarray(draws["draw_index"])[chosen]
    if not np.array_equal(np.asarray(posterior["draw_index"]), expected_index):
        return Check("abcdp-posterior", False, "draw indices differ from the accepted draws")
    for name in names:
        values = np.asarray(posterior[name], dtype=float)
        if not np.array_equal(values, np.asarray(draws[name], dtype=float)[chosen]):
            return Check("abcdp-posterior", False, f"{name} differs from the accepted draws")
        mean = manifest["posterior_mean"].get(name)
        if len(values) and not math.isclose(float(values.mean()), float(mean), rel_tol=1e-9):
            return Check("abcdp-posterior", False, f"posterior mean of {name} differs")
    return Check("abcdp-posterior", True, f"{len(expected_index)} samples = the accepted draws")


def _params(row: dict) -> dict:
    params = row["params"]
    return json.loads(params) if isinstance(params, str) else dict(params)


KIND_CHECKS[KIND] = abcdp_checks
