"""AIM and MST: marginal-based generators from OpenDP's `dp.mbi` (Private-PGM).

MST (McKenna, Miklau and Sheldon 2021) measures every one-way marginal and the two-way
marginals of a maximum spanning tree of column pairs chosen with the exponential mechanism;
AIM (McKenna et al. 2022) adaptively selects and measures the marginals (up to `degree`
columns) that the current model fits worst, with a per-round budget that grows when a
measurement does not help. Both fit a Markov random field to the noisy marginals (mirror
descent, Private-PGM) and sample from it. We use OpenDP's implementation
(`opendp.extras.mbi.AIM` / `MST` through `Context.query().contingency_table`), not a rewrite.

Domain (docs/privacy-model.md section 2). Every column is discretised into its public cells
(`domain.public_cells`: the schema's categories; a numeric column in `bins` equal-width bins of
its schema bounds, one cell per value for small integer ranges, plus a "missing" cell when
nullable). OpenDP sees one integer column per schema column holding the cell index, with
`keys` = every cell index: the keys span all columns, so OpenDP runs no key discovery and the
release is pure rho-zCDP (no delta inside OpenDP). OpenDP appends a "null" key to every keyset;
its noisy count is measured like any other cell, and rows drawn in a null cell are rejected at
sampling (post-processing; their probability is the noise's, close to 0).

Privacy. OpenDP measures under its `SymmetricDistance` with `contributions=1`: adding or removing
one row, our relation (docs/privacy-model.md section 1). The whole fit is rho-zCDP (Bun and Steinke
2016) by OpenDP's own privacy maps and its compositor, which refuses to spend more than rho.
rho is calibrated at construction, before any data is read, from the generator's
(epsilon, delta) with OpenDP's conversion: the largest rho whose zCDP-to-approximate-DP
conversion (`make_zCDP_to_approxDP`, the bound of Canonne, Kamath and Steinke 2020, evaluated
with `make_fix_delta` at delta) is at most epsilon (`zcdp_rho`). The ledger records that
(epsilon, delta) and rho (a typed `ZCDP(rho)` description, for a tighter accountant). A zCDP
mechanism is not pure epsilon-DP: delta = 0 is refused. The row count never enters a
calibration: OpenDP estimates the table's total from noisy counts, and we synthesise exactly the
public N_G rows.

Randomness (docs/privacy-model.md section 9). OpenDP draws all DP noise (the noisy marginals and the
selections' noisy max) inside its Rust core from OpenSSL's `RAND_bytes` (the PyPI wheel is built
with `use-openssl`; `fill_bytes` in OpenDP's samplers), a CSPRNG seeded from OS entropy that no
Python seed reaches. The `NoiseSource` given to `fit` is therefore not used by these
generators. The user seed fixes only synthesis: mbi's sampler reads numpy's legacy global state,
which `_seeded_global_numpy` seeds from the user's generator for the duration of the draw and
restores afterwards; within-bin values are drawn from the user's generator directly.

Synthesis uses `synthetic_data(method="sample")`: i.i.d. ancestral sampling from the fitted
model. mbi 1.1's default `method="round"` draws sibling columns from one shared rank inside
each parent configuration and links them monotonically (rank correlation 0.93 between two
nearly independent columns), so it is never used here. The defaults below and their
measurements: docs/decisions/0023-other-generators-defaults.md. Numeric values are decoded
within their bin uniformly (`domain.write_cells`; integers with one cell per value exactly).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import numpy as np

from dprelease.encoding import Encoder
from dprelease.generators.base import Generator, Measurement
from dprelease.generators.domain import cell_index, public_cells, write_cells
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.mechanisms import ZCDP
from dprelease.privacy.noise import NoiseSource
from dprelease.privacy.zcdp import CONVERSION, zcdp_rho
from dprelease.progress import stage_progress

DEFAULT_BINS = 16
# Mirror-descent iterations per model fit (mbi's default is 1000). AIM refits after every
# round, so this bounds its run time; the fidelity study runs its OpenDP peers at 300 too.
DEFAULT_ITERS = 300
# AIM: OpenDP's default degree (3) and model-size cap (80 MB); rounds capped for run time
# (OpenDP's default is 16 x columns).
DEFAULT_DEGREE = 3
DEFAULT_MAX_SIZE_MB = 80.0
DEFAULT_ROUNDS = 40
MAX_REJECTION_PASSES = 50


def fit_contingency_table(
    frame: Any,
    rho: float,
    algorithm: Any,
    *,
    keys: Mapping[str, Sequence] | None = None,
    cuts: Mapping[str, Sequence[float]] | None = None,
) -> Any:
    """Release OpenDP's `ContingencyTable` of a polars frame under rho-zCDP (one row per unit).

    Straight OpenDP: `Context.compositor(privacy_unit=unit_of(contributions=1),
    privacy_loss=loss_of(rho=rho))`, one query spending all of rho. The benchmark's OpenDP
    peers call this with the raw columns and public cuts.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    with _budget_split_margin():
        return _release_table(dp, frame, rho, algorithm, keys, cuts)


def _release_table(
    dp: Any,
    frame: Any,
    rho: float,
    algorithm: Any,
    keys: Mapping[str, Sequence] | None,
    cuts: Mapping[str, Sequence[float]] | None,
) -> Any:
    context = dp.Context.compositor(
        data=frame.lazy(),
        privacy_unit=dp.unit_of(contributions=1),
        privacy_loss=dp.loss_of(rho=rho),
        split_evenly_over=1,
    )
    query = context.query().contingency_table(
        keys=dict(keys or {}), cuts=dict(cuts or {}), algorithm=algorithm
    )
    return query.release()


def counted_estimator(iters: int, on_fit: Callable[[], None]) -> Callable[..., Any]:
    """mbi's mirror descent with `iters` iterations, calling `on_fit` after each model fit."""

    def estimator(domain: Any, loss_fn: Any, *, potentials: Any = None) -> Any:
        from mbi.estimation import mirror_descent

        model = mirror_descent(domain, loss_fn, potentials=potentials, iters=iters)
        on_fit()
        return model

    return estimator


@contextmanager
def _budget_split_margin() -> Iterator[None]:
    """Work around OpenDP 0.16's MST/AIM budget split failing on rounding.

    MST splits its selection budget into `prior(d / k)` per step, and OpenDP's compositor
    then refuses a step whose (binary-searched) loss exceeds that by one ulp ("insufficient
    budget for query"), for many (rho, columns) pairs (e.g. 11 columns, rho 0.0306). While a
    table is released, the `prior` used by `_mst` and `_aim` to split budgets shrinks by a
    relative 1e-9 more. This only lowers the budgets OpenDP asks for; every spend is still
    checked by OpenDP's own compositors against rho, so the guarantee is unchanged.
    """
    from opendp.extras.mbi import _aim, _mst

    originals = (_aim.prior, _mst.prior)

    def prior(x: float) -> float:
        return float(np.nextafter(x * (1.0 - 1e-9), -np.inf))

    _aim.prior = _mst.prior = prior
    try:
        yield
    finally:
        _aim.prior, _mst.prior = originals


@contextmanager
def _seeded_global_numpy(rng: np.random.Generator) -> Iterator[None]:
    """Seed numpy's legacy global state from `rng` (mbi samples with it); restore it after."""
    state = np.random.get_state()
    np.random.seed(int(rng.integers(2**32)))
    try:
        yield
    finally:
        np.random.set_state(state)


class _OpenDPMarginalGenerator(Generator):
    """Shared plumbing of AIM and MST: public cells, rho, the OpenDP fit, seeded sampling."""

    mechanism: ClassVar[str]
    shows_progress = True
    zcdp_with_delta = True
    lazy_imports = ("polars", "opendp.prelude", "opendp.extras.mbi", "mbi.estimation")
    extra = "mbi"

    def __init__(
        self,
        encoder: Encoder,
        epsilon: float,
        delta: float,
        *,
        bins: int = DEFAULT_BINS,
        iters: int = DEFAULT_ITERS,
        progress: bool = False,
    ) -> None:
        super().__init__(encoder, epsilon, delta)
        if bins < 2:
            raise ValueError("bins must be at least 2")
        if iters < 1:
            raise ValueError("iters must be at least 1")
        self.bins = bins
        self.iters = iters
        self.progress = progress
        self.cells = [public_cells(column, bins) for column in encoder.columns]
        self.names = [f"c{i}" for i in range(len(self.cells))]
        self.rho, self.spent_epsilon = zcdp_rho(epsilon, delta)

    def algorithm_options(self) -> dict:
        """Public options of the OpenDP algorithm (recorded in the configuration)."""
        return {}

    @abstractmethod
    def make_algorithm(self, estimator: Callable[..., Any]) -> Any:
        """The OpenDP algorithm object, fitting models with `estimator`."""

    def config(self) -> dict:
        return {
            "generator": self.name,
            "implementation": "opendp.extras.mbi",
            "bins": self.bins,
            "mirror_descent_iters": self.iters,
            "synthesis": "mbi synthetic_data(method='sample'); uniform within numeric bins",
            "rho": self.rho,
            "cells_per_column": {c.column.name: c.size for c in self.cells},
            **self.algorithm_options(),
        }

    def planned_spends(self) -> list[PlannedSpend]:
        return [
            self.spend(
                self.mechanism,
                ZCDP(self.rho),
                self.spent_epsilon,
                self.delta,
                rho=self.rho,
                conversion=CONVERSION,
                noise="OpenDP core (OpenSSL RAND_bytes, OS entropy)",
                **self.algorithm_options(),
            )
        ]

    def _fit(self, real: np.ndarray, noise: NoiseSource) -> tuple[Any, list[PlannedSpend]]:
        """OpenDP's ContingencyTable (the fitted model) and the spend."""
        import polars as pl

        frame = pl.DataFrame(
            {
                name: pl.Series(cell_index(cells, real).astype(np.int64))
                for name, cells in zip(self.names, self.cells, strict=True)
            }
        )
        keys = {
            name: list(range(cells.size))
            for name, cells in zip(self.names, self.cells, strict=True)
        }
        bar = stage_progress(f"{self.name} model fits", "fit", enabled=self.progress)
        try:
            algorithm = self.make_algorithm(counted_estimator(self.iters, bar.update))
            table = fit_contingency_table(frame, self.rho, algorithm, keys=keys)
        finally:
            bar.close()
        del frame
        return table, self.planned_spends()

    def measurements_of(self, state: Any) -> list[Measurement]:
        """OpenDP's Gaussian measurements of the fitted model's marginals (their cliques,
        standard deviations and noisy counts)."""
        names = dict(zip(self.names, (c.column.name for c in self.cells), strict=True))
        out = []
        for measured in state.marginals.flatten():
            noisy = np.asarray(measured.noisy_measurement, dtype=float)  # flattened cells
            columns = tuple(names[name] for name in measured.clique)
            shape = tuple(len(state.keys[name]) for name in measured.clique)  # keys + null
            std = float(measured.stddev)
            out.append(Measurement(columns, noisy.size, "gaussian", std, float(noisy.sum()), shape))
        return out

    def _sample(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        chosen = self._draw_cells(state, n, rng)
        out = np.zeros((n, self.encoder.width))
        for position, cells in enumerate(self.cells):
            write_cells(out, cells, chosen[:, position], rng)
        return out

    def _draw_cells(self, table: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """n rows of cell indices from the model, rejecting rows in a null (non-schema) cell.

        When the model puts most of its mass on null cells (its noisy counts are mostly noise,
        e.g. an empty table under --on-invalid-rows drop), rejection may not fill n rows in
        `MAX_REJECTION_PASSES` passes: the rows still missing then take a last draw with each
        null cell replaced by a uniform public cell of its column. Post-processing of the
        model either way, so the release publishes whatever the table held."""
        sizes = np.array([cells.size for cells in self.cells])
        batches, have = [], 0
        for last in range(MAX_REJECTION_PASSES, 0, -1):
            with _seeded_global_numpy(rng):
                frame = table.model.synthetic_data(n - have, method="sample").df
            drawn = frame[self.names].to_numpy().astype(np.int64)
            null = drawn >= sizes
            if last == 1:
                drawn = np.where(null, rng.integers(0, sizes, size=drawn.shape), drawn)
            else:
                drawn = drawn[~null.any(axis=1)]
            batches.append(drawn)
            have += len(drawn)
            if have >= n:
                break
        return np.concatenate(batches)[:n]


class MST(_OpenDPMarginalGenerator):
    """OpenDP's MST (`dp.mbi.MST`): one-way marginals plus a spanning tree of two-way ones."""

    name = "mst"
    mechanism = "zcdp-mst"

    def make_algorithm(self, estimator: Callable[..., Any]) -> Any:
        import opendp.prelude as dp

        return dp.mbi.MST(estimator=estimator)


class AIM(_OpenDPMarginalGenerator):
    """OpenDP's AIM (`dp.mbi.AIM`): adaptively measured marginals up to `degree` columns.

    `rounds` caps the number of select-measure-refit rounds (OpenDP's default is 16 x the
    number of columns); with `iters` it bounds the run time. `max_size_mb` is OpenDP's cap on
    the model size. All are public options fixed before the data is read.
    """

    name = "aim"
    mechanism = "zcdp-aim"

    def __init__(
        self,
        encoder: Encoder,
        epsilon: float,
        delta: float,
        *,
        degree: int = DEFAULT_DEGREE,
        rounds: int | None = DEFAULT_ROUNDS,
        max_size_mb: float = DEFAULT_MAX_SIZE_MB,
        **options: Any,
    ) -> None:
        if degree < 1:
            raise ValueError("degree must be at least 1")
        if rounds is not None and rounds < 1:
            raise ValueError("rounds must be at least 1")
        if not max_size_mb > 0:
            raise ValueError("max_size_mb must be positive")
        self.degree = degree
        self.rounds = rounds
        self.max_size_mb = max_size_mb
        super().__init__(encoder, epsilon, delta, **options)

    def algorithm_options(self) -> dict:
        return {"degree": self.degree, "rounds": self.rounds, "max_size_mb": self.max_size_mb}

    def make_algorithm(self, estimator: Callable[..., Any]) -> Any:
        import opendp.prelude as dp

        return dp.mbi.AIM(
            estimator=estimator,
            queries=self.degree,
            rounds=self.rounds,
            max_size=self.max_size_mb,
        )
