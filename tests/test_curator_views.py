"""What a curator reads: a readable weights figure on flat weights, full release ids in piped
`ledger show`, accountant labels that agree after a zCDP (MST) release, and help texts listing
only the exit codes that apply."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from typer.testing import CliRunner

from dprelease.cli.app import app
from dprelease.encoding import Encoder
from dprelease.generators import make_generator
from dprelease.privacy.accounting import Cap, PlannedSpend
from dprelease.privacy.calibration import gaussian_sigma
from dprelease.privacy.ledger.ledger import Ledger
from dprelease.privacy.ledger.view import ledger_summary_lines
from dprelease.privacy.mechanisms import Gaussian
from dprelease.release.report.figures import weights_figure
from dprelease.schema import load_schema

SCHEMA = load_schema(Path(__file__).parent.parent / "data" / "census.yaml")
RELEASE_ID = "20261123T120000Z-0123456789abcdef0123456789abcdef"  # longer than rich's share


@pytest.mark.parametrize("k_hat", ["-inf", -0.49, 1.19, None])
def test_the_weights_figure_of_flat_weights_is_readable(k_hat):
    n = 2000
    figure = weights_figure(
        np.ones(n), np.zeros(n), np.zeros(n), {"k_hat": k_hat, "threshold": 0.7, "tail_length": 50}
    )
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    inside = figure.bbox.padded(1)
    for axis in figure.axes:
        for scale in (axis.xaxis, axis.yaxis):
            assert scale.get_offset_text().get_text() == ""  # no "1e-12+1"
            low, high = sorted(scale.get_view_interval())
            coordinate = 0 if scale is axis.xaxis else 1
            drawn = [
                label
                for label in scale.get_ticklabels()  # also holds ticks outside the view
                if low - 1e-9 <= label.get_position()[coordinate] <= high + 1e-9
            ]
            for label in [*drawn, scale.label]:
                if label.get_visible() and label.get_text():
                    box = label.get_window_extent(renderer)
                    assert inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)
    k_hat_axis = figure.axes[-1]
    for artist in [*k_hat_axis.lines, *k_hat_axis.texts]:  # the marker and its label
        box = artist.get_window_extent(renderer)
        if artist in k_hat_axis.lines and artist.get_marker() == "D":
            assert k_hat_axis.bbox.contains(box.x0, box.y0) and k_hat_axis.bbox.contains(
                box.x1, box.y1
            )
        assert inside.contains(box.x0, box.y0) and inside.contains(box.x1, box.y1)


@pytest.fixture
def mst_ledger(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    planned = make_generator("mst", Encoder(SCHEMA), 1.0, 1e-6).planned_spends()
    with Ledger(url) as ledger:
        ledger.reserve("census", Cap(12.0, 1e-5, "pld"), RELEASE_ID, planned)
    return url


def test_ledger_show_piped_keeps_whole_release_ids(mst_ledger):
    result = CliRunner().invoke(app, ["ledger", "show", "census", "--ledger", mst_ledger])
    assert result.exit_code == 0, result.output
    table_rows = [line for line in result.output.splitlines() if "zcdp" in line]
    assert table_rows and all(RELEASE_ID in line for line in table_rows)


def test_labels_agree_with_the_enforcing_accountant_after_an_mst_release(mst_ledger):
    with Ledger(mst_ledger) as ledger:
        summary = ledger.summary("census")
    assert summary["accountant"] == "rdp"
    assert {entry["accounted_as"] for entry in summary["entries"]} == {"rdp"}
    # the reported figure composed the whole history in Rényi DP: it is not called PLD
    assert set(summary["reported"]) == {"rdp-all-orders"}
    shown = CliRunner().invoke(app, ["ledger", "show", "census", "--ledger", mst_ledger]).output
    assert "pld:" not in shown


def _gaussian_releases(url: str, cap: Cap, count: int) -> dict:
    sigma = gaussian_sigma(1.0, 0.5, 1e-8)
    release = PlannedSpend("gaussian", 0.5, 1e-8, {}, Gaussian(sigma, 1.0))
    with Ledger(url) as ledger:
        for number in range(count):
            ledger.reserve("census", cap, f"r{number}", [release])
        return ledger.summary("census")


def test_an_rdp_ledger_whose_sum_exceeds_the_cap_says_plainly_it_is_no_overspend(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    summary = _gaussian_releases(url, Cap(4.0, 1e-6, "rdp"), 11)
    spent = summary["by_accountant"]["rdp"]["spent"]["epsilon"]
    left = summary["by_accountant"]["rdp"]["remaining"]["epsilon"]
    fits = summary["last_release"]["releases_that_fit"]
    assert summary["spent"]["epsilon"] == pytest.approx(5.5) and spent < 4 < 5.5
    assert fits["basic"] == 0 < fits["rdp"]
    words = summary["plain_summary"]
    for said in (
        "The privacy cap of dataset 'census' (epsilon 4, delta 1e-06) is enforced by the Rényi "
        "filter (rdp accountant)",
        f"spent the equivalent of epsilon {spent:.3g} of 4 at delta 1e-06",
        f"so epsilon {left:.3g} remains, room for {fits['rdp']} more releases like the last one",
        "epsilons and deltas add up to 5.5 and "
        f"{summary['spent']['delta']:.3g} (basic composition), more than the cap: that is "
        "expected, not an overspend, because the Rényi filter composes the releases' noise "
        "more tightly",
    ):
        assert said in words
    lines = ledger_summary_lines(summary)
    (basic,) = [line for line in lines if line.startswith(" basic:")]
    assert "remaining" not in basic and "not checked against the cap" in basic
    assert lines[-1] == f"in plain words: {words}"
    shown = CliRunner().invoke(app, ["ledger", "show", "census", "--ledger", url]).output
    assert "in plain words: The privacy cap of dataset 'census'" in " ".join(shown.split())
    keys = {"dataset", "cap", "accountant", "recorded_accountant", "spent", "by_accountant"}
    assert keys | {"reported", "last_release", "notes", "entries"} <= set(summary)


def test_an_rdp_ledger_names_the_delta_its_generic_entries_draw_and_a_looser_pld(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite'}"
    cap = Cap(12.0, 1e-5, "rdp")
    with Ledger(url) as ledger:  # a spend known only by (epsilon, delta), then Gaussians
        ledger.reserve("census", cap, "g0", [PlannedSpend("generic", 1.0, 2e-6)])
    summary = _gaussian_releases(url, cap, 4)
    words = summary["plain_summary"]
    assert (
        "draw their deltas from the 5e-06 of the cap's delta the filter keeps for them: "
        "2e-06 of it is used, which may be what limits further releases"
    ) in words
    lines = ledger_summary_lines(summary)
    reported = [line for line in lines if "reported only" in line]
    assert reported
    enforced = summary["by_accountant"]["rdp"]["spent"]["epsilon"]
    for line in reported:
        figure = float(line.split("epsilon=")[1].split()[0])
        assert ("adds nothing" in line) == (figure >= enforced)


def test_a_basic_ledger_says_what_is_left_in_plain_words(tmp_path):
    summary = _gaussian_releases(f"sqlite:///{tmp_path / 'ledger.sqlite'}", Cap(2.0, 1e-6), 3)
    assert summary["plain_summary"] == (
        "The privacy cap of dataset 'census' (epsilon 2, delta 1e-06) is enforced by basic "
        "composition (the epsilons and deltas of its releases add up); it has spent epsilon "
        "1.5 and delta 3e-08 of it, so epsilon 0.5 and delta 9.7e-07 remain, room for 1 more "
        "release like the last one (epsilon 0.5, delta 1e-08 each)."
    )


def test_help_lists_only_the_exit_codes_that_apply():
    runner = CliRunner()
    assert "4 PSIS" in runner.invoke(app, ["release", "--help"], terminal_width=200).output
    for command in (
        ["infer", "--help"],
        ["infer", "abcdp", "--help"],
        ["ledger", "show", "--help"],
    ):
        output = runner.invoke(app, command, terminal_width=200).output
        assert "Exit codes" in output and "4 PSIS" not in output, command


def test_the_privacy_statement_says_an_rdp_datasets_sum_is_no_overspend():
    from dprelease.privacy.accounting import Spend
    from dprelease.release.writer import privacy_statement
    from dprelease.verify.budget import statement_check

    spends = {
        "release_spend": Spend(0.5, 1e-8),
        "dataset_total": Spend(5.5, 1.1e-7),
        "cap": Spend(4.0, 1e-6),
        "accountant_total": Spend(1.81, 1e-6),
    }
    statement = privacy_statement(
        spends["release_spend"],
        spends["dataset_total"],
        spends["cap"],
        "rdp",
        accountant_total=spends["accountant_total"],
    )
    assert (
        "dataset total epsilon=5.5, delta=1.1e-07 (basic composition, the entries' sum: under "
        "rdp it may exceed the cap without any overspend); under rdp composition"
    ) in statement
    manifest = {key: {"epsilon": s.epsilon, "delta": s.delta} for key, s in spends.items()}
    assert statement_check({**manifest, "privacy_statement": statement, "accountant": "rdp"}).passed
