"""The fidelity study's peers (benchmarks/fidelity.py): OpenDP's and dpmm's AIM and MST on
the same public cells as dprelease's default release.

Every column becomes the public cells dprelease's default generator fits on for this
table (`column_cells`: `pgm`'s resolution for the training split's row count, its rule on
the exact count instead of its noisy one; 16 cells per numeric column on the small tables,
up to 64 where the count supports them; categories; one cell per value for integers with at
most that many values). The peers see one integer column per schema column holding the
cell index, with every cell index as a public key, and their synthetic cell indices are
decoded into encoded rows with dprelease's `domain.write_cells` (a value uniform inside its
cell, never outside), so the peers and dprelease differ in the model only, not in the
discretisation or decoding.

- OpenDP (`dp.mbi.AIM` / `MST` through `Context.query().contingency_table`, the whole
  (epsilon, delta) converted to rho with OpenDP's own conversion, `synthetic_data(method=
  "sample")`, rows drawn in OpenDP's extra null key rejected): mirror descent limited to
  `ITERS` iterations per model fit and AIM to `ROUNDS` rounds (OpenDP's defaults, 1000
  iterations and 16 x columns rounds, take tens of minutes per release here).
- dpmm (`dpmm.pipelines.AIMPipeline` / `MSTPipeline`, its binning switched off) in its own
  venv as a subprocess (benchmarks/fidelity_dpmm.py): dpmm pins older numpy/OpenDP.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from dprelease.encoding import Encoder
from dprelease.generators.domain import ColumnCells, cell_index, write_cells
from dprelease.generators.lattice import Lattice, class_counts
from dprelease.generators.mbi import counted_estimator, fit_contingency_table
from dprelease.generators.pgm.generator import PrivateGraphicalModel
from dprelease.privacy.noise import NoiseSource
from dprelease.privacy.zcdp import zcdp_rho

CELLS = "pgm-bounds"  # the cache key's name for `column_cells`' rule (since bound cells)
ITERS = 300
ROUNDS = 40
MAX_PASSES = 50


def peak_mb() -> float:
    """This process's peak resident memory in MB: Linux's `VmHWM`, which starts afresh at
    exec (`ru_maxrss` would carry over the parent's peak through fork and exec)."""
    status = Path("/proc/self/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return float(line.split()[1]) / 1024


def column_cells(encoder: Encoder, rows: int, epsilon: float, delta: float) -> list[ColumnCells]:
    """The cells `pgm` fits on for `rows` rows at (epsilon, delta) (evaluation only: the
    exact count stands in for pgm's noisy one)."""
    return PrivateGraphicalModel(encoder, epsilon, delta).grid(float(rows)).cells


def decode(
    encoder: Encoder,
    cells: list[ColumnCells],
    chosen: np.ndarray,
    seed: int,
    lattices: dict[int, Lattice] | None = None,
) -> np.ndarray:
    """Encoded rows of the chosen cell indices (`write_cells`: uniform within a cell, or on
    a column's lattice where `lattices` has one)."""
    rng = np.random.default_rng(seed)
    out = np.zeros((len(chosen), encoder.width))
    for position, column in enumerate(cells):
        write_cells(out, column, chosen[:, position], rng, (lattices or {}).get(position))
    return out


def with_lattice(
    encoder: Encoder,
    train: np.ndarray,
    synthetic: np.ndarray,
    epsilon: float,
    delta: float,
    seed: int,
) -> np.ndarray:
    """A peer's rows decoded again on the lattice `pgm` measures (`generators.lattice`): the
    cells recovered from the rows (the peers' cells are `pgm`'s), each continuous column's
    class histogram measured as `pgm` measures it at this budget (`lattices_of`, noise from
    OS entropy; the peer's own budget is not reduced by that 1 %), its threshold for the
    exact row count (evaluation only)."""
    generator = PrivateGraphicalModel(encoder, epsilon, delta)
    cells = column_cells(encoder, len(train), epsilon, delta)
    chosen = np.column_stack([cell_index(c, synthetic) for c in cells])
    counts = [class_counts(encoder.columns[j], train) for j in generator.lattice_columns]
    lattices = generator.lattices_of(counts, float(len(train)), NoiseSource())
    return decode(encoder, cells, chosen, seed, lattices)


def opendp(
    method: str,
    encoder: Encoder,
    train: np.ndarray,
    epsilon: float,
    delta: float,
    n: int,
    seed: int,
) -> tuple[np.ndarray, float]:
    """OpenDP's AIM or MST: (encoded synthetic rows, CPU seconds of fit + sampling)."""
    import opendp.prelude as dp
    import polars as pl

    started = time.process_time()
    cells = column_cells(encoder, len(train), epsilon, delta)
    names = [f"c{i}" for i in range(len(cells))]
    frame = pl.DataFrame({nm: cell_index(c, train) for nm, c in zip(names, cells, strict=True)})
    keys = {nm: list(range(c.size)) for nm, c in zip(names, cells, strict=True)}
    estimator = counted_estimator(ITERS, lambda: None)
    if method == "aim":
        algorithm = dp.mbi.AIM(estimator=estimator, rounds=ROUNDS)
    else:
        algorithm = dp.mbi.MST(estimator=estimator)
    rho, _ = zcdp_rho(epsilon, delta)
    table = fit_contingency_table(frame, rho, algorithm, keys=keys)
    sizes = np.array([c.size for c in cells])
    np.random.seed(seed)  # mbi samples with numpy's global state
    batches, have = [], 0
    for _ in range(MAX_PASSES):
        drawn = table.model.synthetic_data(n - have, method="sample").df[names].to_numpy()
        drawn = drawn[(drawn < sizes).all(axis=1)].astype(np.int64)
        batches.append(drawn)
        have += len(drawn)
        if have >= n:
            break
    chosen = np.concatenate(batches)[:n]
    return decode(encoder, cells, chosen, seed), time.process_time() - started


def dpmm(
    method: str,
    encoder: Encoder,
    train: np.ndarray,
    epsilon: float,
    delta: float,
    n: int,
    seed: int,
    python: Path,
) -> tuple[np.ndarray, float, float]:
    """dpmm's AIM or MST in its venv: (encoded rows, CPU seconds, peak MB of its process)."""
    cells = column_cells(encoder, len(train), epsilon, delta)
    chosen = np.column_stack([cell_index(c, train) for c in cells])
    with tempfile.TemporaryDirectory(prefix="fidelity-dpmm-") as directory:
        given, result = Path(directory) / "in.npz", Path(directory) / "out.npz"
        np.savez(
            given,
            cells=chosen,
            sizes=np.array([c.size for c in cells]),
            method=method,
            epsilon=epsilon,
            delta=delta,
            n=n,
            seed=seed,
            iters=ITERS,
            rounds=ROUNDS,
        )
        script = Path(__file__).with_name("fidelity_dpmm.py")
        subprocess.run([str(python), str(script), str(given), str(result)], check=True)
        out = np.load(result)
        synthetic = decode(encoder, cells, out["cells"], seed)
        return synthetic, float(out["cpu"]), float(out["peak_mb"])
