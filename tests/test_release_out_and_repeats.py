"""`--out` inside a release is refused before anything is spent, and an identical release
run twice in a day is warned about before its spend (issue 19 item 12)."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from conftest import SeededNoise
from release_fixtures import TINY_SCHEMA

from dprelease.config import SyntheticConfig
from dprelease.errors import InputError
from dprelease.privacy.ledger import Ledger
from dprelease.release.pipeline import DuplicateReleaseWarning, publish_release
from dprelease.release.synthetic import SYNTHETIC_PIPELINE

TABLE = pd.DataFrame({"x": [0.5, 0.2, 0.9], "k": [1, 2, 3], "y": ["a", "b", "a"]})


def _publish(tmp_path, out, seed=None):  # noqa: ANN001, ANN202
    config = SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100, seed=seed)
    return publish_release(
        SYNTHETIC_PIPELINE,
        TINY_SCHEMA,
        config,
        TABLE,
        out_dir=out,
        ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
        noise=SeededNoise(0),
    )


def _entries(tmp_path) -> int:  # noqa: ANN001
    with Ledger(f"sqlite:///{tmp_path / 'ledger.sqlite'}") as ledger:
        return len(ledger.entries(TINY_SCHEMA.dataset))


def test_out_inside_a_release_is_refused_before_any_spend(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateReleaseWarning)  # the first run: no warning
        release = _publish(tmp_path, tmp_path / "releases")
    spent = _entries(tmp_path)
    for inside in (release, release / "nested" / "deeper"):
        with pytest.raises(InputError, match="inside the release directory"):
            _publish(tmp_path, inside)
    assert _entries(tmp_path) == spent
    assert not (release / "nested").exists()


def test_the_same_configuration_twice_today_is_warned_before_it_spends(tmp_path):
    _publish(tmp_path, tmp_path / "releases")
    spent = _entries(tmp_path)
    with pytest.warns(DuplicateReleaseWarning, match="same configuration today") as caught:
        _publish(tmp_path, tmp_path / "releases")
    assert len(caught) == 1
    assert _entries(tmp_path) == 2 * spent  # warned, not refused: it spent again
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateReleaseWarning)
        _publish(tmp_path, tmp_path / "releases", seed=7)  # another configuration


def test_the_command_warns_and_refuses_before_prefect_starts(tmp_path, capsys):
    from dprelease.cli.support import check_before_run
    from dprelease.release.synthetic_plan import plan_release

    release = _publish(tmp_path, tmp_path / "releases")
    table = tmp_path / "table.csv"
    TABLE.to_csv(table, index=False)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100)
    plan = plan_release(TINY_SCHEMA, config)
    check_before_run(url, plan, table, config, tmp_path / "releases")
    assert "already has a release with the same configuration today" in (
        capsys.readouterr().err.replace("\n", " ")
    )
    with pytest.raises(InputError, match="inside the release directory"):
        check_before_run(url, plan, table, config, release)
