"""Progress on a stderr that is not a terminal: no bar redraws (`\\r`), a line per stage
instead; a bar only on a terminal."""

from __future__ import annotations

import logging
import sys
import types

import numpy as np
import pandas as pd

from dprelease.cli import support
from dprelease.encoding import Encoder
from dprelease.generators import make_generator, mbi
from dprelease.progress import stage_progress
from dprelease.schema import Schema

SCHEMA = Schema.model_validate(
    {
        "dataset": "tiny",
        "max_rows": 1000,
        "budget": {"epsilon": 100.0, "delta": 1e-3},
        "columns": {
            "a": {"type": "categorical", "categories": ["p", "q"]},
            "b": {"type": "integer", "min": 0, "max": 4},
        },
    }
)
ENCODER = Encoder(SCHEMA)
SMALL = {"hidden": (16, 16), "latent_dim": 8, "batch_size": 32, "sample_rate": 0.1}


def stage_lines(err: str) -> list[str]:
    assert "\r" not in err
    return [line for line in err.splitlines() if line]


def test_generators_print_a_line_per_stage_when_stderr_is_redirected(
    capsys, monkeypatch, seeded_noise
):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.choice(["p", "q"], 300), "b": rng.integers(0, 5, 300)})
    real = ENCODER.encode(frame)

    # mbi's fit itself (JAX compilation, tens of seconds here) is not what is tested: three
    # model fits stand in for it, reported through the estimator as mbi reports them.
    def fit(frame, rho, estimate, keys):  # noqa: ANN001, ANN202
        for _ in range(3):
            estimate(None, None)

    monkeypatch.setattr(mbi, "fit_contingency_table", fit)
    mst = make_generator("mst", ENCODER, 2.0, 1e-5, iters=20, progress=True)
    monkeypatch.setattr(type(mst), "make_algorithm", lambda self, estimator: estimator)
    monkeypatch.setattr(mbi, "counted_estimator", lambda iters, on_fit: lambda *a: on_fit())
    mst.fit(real, seeded_noise(0))
    assert stage_lines(capsys.readouterr().err) == [
        "mst model fits: started",
        "mst model fits: done",
    ]
    gan = make_generator("dpgan", ENCODER, 4.0, 1e-5, steps=3, progress=True, **SMALL)
    gan.fit(real, seeded_noise(1))
    lines = stage_lines(capsys.readouterr().err)
    assert len(lines) == 2 and lines[0].endswith("started (3 steps)") and lines[1].endswith("done")


def test_a_bar_only_on_a_terminal(monkeypatch, capsys):
    from tqdm import tqdm

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    bar = stage_progress("fits", "fit", enabled=True)
    assert isinstance(bar, tqdm)
    bar.close()
    capsys.readouterr()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    bar = stage_progress("fits", "fit", enabled=True, total=1000)
    for _ in range(1000):
        bar.update()
    bar.close()
    assert stage_lines(capsys.readouterr().err) == ["fits: started (1000 fits)", "fits: done"]


def test_the_cli_prints_a_line_per_task_when_stderr_is_redirected(monkeypatch, capsys):
    def flow() -> str:
        logger = logging.getLogger("prefect.task_runs")
        for name in ["read-input-a1f", "read-input-a1f", "fit-generator-0b2", "publish-9c"]:
            logger.info("running", extra={"task_run_name": name})
        return "done"

    monkeypatch.setitem(sys.modules, "fake_flows", types.SimpleNamespace(flow=flow))
    monkeypatch.setattr(support, "prepare_prefect", lambda verbose: None)
    monkeypatch.setattr(support, "check_prefect_server", lambda: None)  # no server hint
    logging.getLogger("prefect.task_runs").setLevel(logging.INFO)
    assert support.run_flow("fake_flows:flow", verbose=False, what="release of x") == "done"
    assert stage_lines(capsys.readouterr().err) == [
        "release of x: read-input",
        "release of x: fit-generator",
        "release of x: publish",
    ]
