"""The public Python API: `dprelease.__all__` is pinned, every name resolves, importing the
package imports none of the heavy dependencies, and `dprelease.publish` releases each kind
from a DataFrame through the guarded pipeline."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest
from release_fixtures import ROOT

import dprelease
from dprelease.datasets import census_like

PUBLIC = {
    "ABCDPConfig",
    "BudgetExceededError",
    "DPReleaseError",
    "InputError",
    "Ledger",
    "Release",
    "Schema",
    "SyntheticConfig",
    "TruncationConfig",
    "UnreliableWeightsError",
    "VerificationResult",
    "__version__",
    "design_matrix",
    "expectation_suite",
    "fit_weighted",
    "glm_effective_sample_size",
    "load_release",
    "load_schema",
    "publish",
    "verify_release",
    "weighted_mean",
}


def test_the_public_names_are_pinned_and_resolve():
    assert set(dprelease.__all__) == PUBLIC
    for name in dprelease.__all__:
        assert getattr(dprelease, name) is not None, name
    assert set(dir(dprelease)) == PUBLIC
    with pytest.raises(AttributeError):
        dprelease.not_a_name  # noqa: B018


def test_importing_the_package_imports_no_heavy_dependency():
    code = (
        "import sys, dprelease; heavy = {'torch', 'opacus', 'jax', 'dask', 'prefect', "
        "'opendp', 'pandas', 'sqlalchemy', 'great_expectations'}; "
        "print(sorted(heavy & set(sys.modules)))"
    )
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert shown.stdout.strip() == "[]", shown.stderr


def test_publish_releases_from_a_dataframe_and_the_release_verifies(tmp_path):
    schema = dprelease.load_schema(f"{ROOT}/data/census.yaml").model_copy(
        update={"dataset": "api-census"}
    )
    table = census_like(2000, seed=4)
    directory = dprelease.publish(
        table,
        schema,
        dprelease.SyntheticConfig(epsilon=1.0, n_synthetic=2000, seed=0),
        out_dir=tmp_path / "releases",
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
    )
    assert directory.parent.parent == tmp_path / "releases"
    assert dprelease.verify_release(directory).passed
    release = dprelease.load_release(directory)
    assert len(release.table) == 2000
    manifest = json.loads((directory / "manifest.json").read_text())
    assert manifest["kind"] == "synthetic" and manifest["on_invalid_rows"] == "drop"
    with dprelease.Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}") as ledger:
        assert ledger.spent("api-census").epsilon == pytest.approx(1.0)


def test_publish_refuses_an_unknown_config_type(tmp_path):
    with pytest.raises(TypeError, match="SyntheticConfig, TruncationConfig or ABCDPConfig"):
        dprelease.publish(pd.DataFrame(), f"{ROOT}/data/census.yaml", object(), out_dir=tmp_path)  # type: ignore[arg-type]
