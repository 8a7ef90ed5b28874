"""What every release's privacy statement says, read from the published files as a recipient
reads them: what the guarantee is conditional on (it opens with it), where the noise came
from, and who may see the orchestrator's run records. The invalid-row and noise defaults of
the configs and the CLI."""

from __future__ import annotations

import inspect
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from release_fixtures import TINY_SCHEMA, publish_table

from dprelease.cli.infer import abcdp as abcdp_command
from dprelease.cli.infer import adaptive_truncation as adaptive_truncation_command
from dprelease.cli.release import release as release_command
from dprelease.config import (
    ABCDPConfig,
    InvalidRows,
    SyntheticConfig,
    TruncationConfig,
)
from dprelease.privacy.accounting import Spend
from dprelease.release.writer import noise_clause, privacy_statement

TABLE = pd.DataFrame({"x": [0.5, 0.2, 0.9], "k": [1, 2, 3], "y": ["a", "b", "a"]})
SPEND = Spend(1.0, 1e-6)


def _statement(tmp_path, **settings) -> str:
    config = SyntheticConfig(
        epsilon=1.0, weights="none", n_synthetic=100, allow_unreliable_weights=True, **settings
    )
    release, manifest = publish_table(tmp_path, TINY_SCHEMA, config, TABLE)
    stored = pq.read_schema(release / "synthetic.parquet").metadata
    assert stored[b"dprelease.privacy_statement"].decode() == manifest["privacy_statement"]
    return manifest["privacy_statement"]


def test_under_refuse_the_statement_opens_with_its_condition(tmp_path):
    statement = _statement(tmp_path, on_invalid_rows="refuse")
    assert statement.startswith(
        "Given that this release exists (an input with any invalid row is refused, so its "
        "existence reveals that every input row was valid), (epsilon, delta)-DP"
    )


def test_under_drop_the_guarantee_is_unconditional(tmp_path):
    statement = _statement(tmp_path, on_invalid_rows="drop")
    assert statement.startswith("(epsilon, delta)-DP for the add/remove of one row")
    assert "whether this release exists does not depend on any one row" in statement
    assert "Given that" not in statement


def test_the_statement_says_where_the_noise_came_from(tmp_path):
    floating = _statement(tmp_path / "a")
    assert "drawn in floating point" in floating and "Mironov 2012" in floating
    secure = _statement(tmp_path / "b", secure_noise=True)
    assert "OpenDP's samplers applied to the values themselves" in secure
    assert "resistant to floating-point attacks" in secure and "Mironov" not in secure


def test_dpsgd_noise_is_described_as_what_it_is():
    for secure in (False, True):
        clause = noise_clause(secure, dpsgd=True)
        assert "torch's generator seeded from OS entropy" in clause
        assert "not from a cryptographic sampler" in clause
    assert "four draws" in noise_clause(True, dpsgd=True)


def test_every_statement_states_the_trust_boundary_of_the_run_records(tmp_path):
    statement = _statement(tmp_path)
    assert "Prefect's task start and end times" in statement
    assert "only those who may see the real table may see them" in statement
    assert "Prefect" in privacy_statement(SPEND, SPEND, SPEND)


def test_the_configs_default_to_drop_and_the_cli_to_refuse():
    assert SyntheticConfig(epsilon=1.0).on_invalid_rows == InvalidRows.drop
    assert TruncationConfig(column="x", epsilon=1.0).on_invalid_rows == InvalidRows.drop
    abcdp = ABCDPConfig(model="m.py:M", n_samples=1, threshold=0.1, epsilon=1.0)
    assert abcdp.on_invalid_rows == InvalidRows.drop
    for command in (release_command, adaptive_truncation_command, abcdp_command):
        default = inspect.signature(command).parameters["on_invalid_rows"].default
        assert default == InvalidRows.refuse


def test_adaptive_truncation_defaults_to_secure_noise():
    assert TruncationConfig(column="x", epsilon=1.0).secure_noise is True
    default = inspect.signature(adaptive_truncation_command).parameters["secure_noise"].default
    assert default is True
    assert SyntheticConfig(epsilon=1.0).secure_noise is False


@pytest.mark.parametrize("kind", ["drop", "refuse"])
def test_the_statement_names_no_count_or_time(kind, tmp_path):
    statement = _statement(tmp_path, on_invalid_rows=kind)
    manifest = json.loads(next(tmp_path.rglob("manifest.json")).read_text())
    assert manifest["release_id"] not in statement
    assert " 3 rows" not in statement and "seconds" not in statement
