"""`--out` inside a release is refused before anything is spent, and an identical release
run twice in a day is warned about right before its spend, never when it is refused before."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from conftest import SeededNoise
from release_fixtures import TINY_SCHEMA

from dprelease.cli.support import NOT_USABLE_EXIT
from dprelease.config import SyntheticConfig
from dprelease.errors import InputError
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.release.pipeline import DuplicateReleaseWarning, publish_release
from dprelease.release.synthetic.pipeline import SYNTHETIC_PIPELINE

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


@pytest.mark.parametrize(
    "refused",
    [
        TABLE.assign(y=["a", "b", "c"]),  # a category outside the schema
        TABLE.iloc[:0],  # a header and no rows
    ],
)
def test_a_repeat_refused_before_its_spend_is_not_warned(tmp_path, refused):
    _publish(tmp_path, tmp_path / "releases")
    spent = _entries(tmp_path)
    config = SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100, on_invalid_rows="refuse")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DuplicateReleaseWarning)
        with pytest.raises(InputError):
            publish_release(
                SYNTHETIC_PIPELINE,
                TINY_SCHEMA,
                config,
                refused,
                out_dir=tmp_path / "releases",
                ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
                noise=SeededNoise(0),
            )
    assert _entries(tmp_path) == spent


def test_the_command_checks_refuse_before_prefect_and_do_not_warn(tmp_path, capsys):
    from dprelease.cli.support import check_before_run
    from dprelease.release.synthetic.plan import plan_release

    release = _publish(tmp_path, tmp_path / "releases")
    table = tmp_path / "table.csv"
    TABLE.to_csv(table, index=False)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    config = SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100, on_invalid_rows="refuse")
    plan = plan_release(TINY_SCHEMA, config)
    check_before_run(url, plan, table, config, tmp_path / "releases")
    assert "same configuration" not in capsys.readouterr().err  # the run warns, if it spends
    with pytest.raises(InputError, match="inside the release directory"):
        check_before_run(url, plan, table, config, release)


def _in_process_flow(**params):  # noqa: ANN003, ANN202
    """A stand-in for the release flow: `publish_release` in this process, without Prefect."""
    return publish_release(
        SYNTHETIC_PIPELINE,
        params["schema_path"],
        params["config"],
        params["input_path"],
        out_dir=params["out_dir"],
        ledger_url=params["ledger_url"],
        noise=SeededNoise(0),
    )


@pytest.fixture
def command(tmp_path, monkeypatch):  # noqa: ANN001, ANN201
    """Runs `publish_command` of the tiny schema on a table with the in-process flow; gives
    its exit code and stderr."""
    import sys
    import types

    import typer
    import yaml

    from dprelease.cli import support
    from dprelease.release.synthetic.plan import plan_release

    monkeypatch.setitem(
        sys.modules, "in_process_flows", types.SimpleNamespace(flow=_in_process_flow)
    )
    monkeypatch.setattr(support, "prepare_prefect", lambda verbose: None)
    monkeypatch.setattr(support, "check_prefect_server", lambda: None)
    schema = tmp_path / "tiny.yaml"
    schema.write_text(yaml.safe_dump(TINY_SCHEMA.public_dict()))
    config = SyntheticConfig(epsilon=1.0, weights="none", n_synthetic=100, on_invalid_rows="refuse")

    def run(table: pd.DataFrame, capsys) -> tuple[int, str]:  # noqa: ANN001
        path = tmp_path / "table.csv"
        table.to_csv(path, index=False)
        try:
            support.publish_command(
                "in_process_flows:flow",
                plan=plan_release(TINY_SCHEMA, config),
                input_path=path,
                schema=schema,
                config=config,
                out=tmp_path / "releases",
                ledger_url=f"sqlite:///{tmp_path / 'ledger.sqlite'}",
                verbose=False,
                what="release",
                summary=lambda manifest: manifest["release_id"],
            )
        except typer.Exit as exit_:
            return exit_.exit_code, capsys.readouterr().err.replace("\n", " ")
        return 0, capsys.readouterr().err.replace("\n", " ")

    return run


PUBLISHED = {0, NOT_USABLE_EXIT}  # a three-row table's release is published "not usable"


def test_the_command_warns_on_stderr_when_a_repeat_reaches_its_spend(tmp_path, command, capsys):
    assert command(TABLE, capsys)[0] in PUBLISHED
    code, err = command(TABLE.assign(y=["a", "b", "c"]), capsys)  # refused by validation
    assert code == 2 and "same configuration today" not in err
    code, err = command(TABLE, capsys)
    assert code in PUBLISHED
    assert "warning: dataset 'tiny' already has a release with the same " in err
    assert "this run spends its budget again" in err
    assert err.index("warning: dataset 'tiny'") < err.index("published:")


def test_the_command_states_the_budget_in_plain_words_after_a_release(command, capsys):
    code, err = command(TABLE, capsys)
    assert code in PUBLISHED and err.index("published:") < err.index(
        "budget: The privacy cap of dataset 'tiny' (epsilon 50, delta 0.0001) is enforced by "
        "basic composition"
    )
