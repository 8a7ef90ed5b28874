"""The interface every synthetic-data generator implements.

A `Generator` is the public plan of a generator: built from the public encoder, its share of
the privacy budget and public options, and calibrated at construction from public quantities
only, so `planned_spends()` can be reserved in the ledger before the real data is read
(docs/privacy-model.md section 7). It is never changed by fitting: `fit` returns a
`FittedGenerator` holding the DP state learned from the real rows and the spends actually made
(never more than planned); sampling from it is post-processing and may be seeded by the user.

A fitted generator also says what it measured (`measurements`): every noisy marginal, its
public cells, the noise on each cell count and the noisy total (a DP estimate of the row
count). The release states from them how accurate each released marginal can be
(`dprelease.diagnostics.accuracy`); they are DP outputs and public quantities only.

A generator that can be fitted from exact cell counts summed outside (chunk by chunk while
streaming the input, or reduced over Dask partitions) is a `CountsGenerator`: it declares
the counting query (`cell_counts`) and `fit_counts`; the same query on the whole table gives
the same fit, since the noise is drawn once, on the summed counts.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol

import numpy as np

from dprelease.encoding import Encoder
from dprelease.errors import require
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.mechanisms import Laplace, Mechanism
from dprelease.privacy.noise import NoiseSource

SAMPLE_BATCH_ROWS = 100_000


class Discriminator(Protocol):
    """A DP-trained classifier of real (1) versus synthetic (0) rows."""

    def logit(self, encoded: np.ndarray) -> np.ndarray:
        """log P(real | x) - log P(synthetic | x) for each encoded row."""
        ...


@dataclass(frozen=True)
class Measurement:
    """A marginal a generator measured with noise: its columns, how many public cells it has,
    the noise on each cell count (`noise` "laplace" or "gaussian" with standard deviation
    `noise_std`), the sum of its noisy counts (a DP estimate of the row count) and, where the
    generator states it, its cells per column (`shape`, in the order of `columns`)."""

    columns: tuple[str, ...]
    cells: int
    noise: Literal["laplace", "gaussian"]
    noise_std: float
    noisy_total: float
    shape: tuple[int, ...] | None = None


@dataclass(frozen=True)
class FittedGenerator:
    """A generator's plan, the DP state it learned (post-processing from here on) and the
    spends its fit actually made."""

    generator: Generator
    state: Any
    spends: tuple[PlannedSpend, ...]

    def sample(
        self, n: int, rng: np.random.Generator, *, batch_rows: int = SAMPLE_BATCH_ROWS
    ) -> np.ndarray:
        """Draw n encoded rows in batches of at most `batch_rows`, each written into the
        output as it is drawn (concatenating the batches would hold every row twice: 1.8 GB at
        the peak of 400,000 rows of 134 encoded columns;
        docs/decisions/0030-scale-and-latency.md)."""
        if n < 1:
            raise ValueError("the number of synthetic rows must be at least 1")
        out = np.empty((n, self.generator.encoder.width))
        for start in range(0, n, batch_rows):
            stop = min(n, start + batch_rows)
            out[start:stop] = self.generator._sample(self.state, stop - start, rng)
        return out

    @property
    def discriminator(self) -> Discriminator | None:
        """The probabilistic discriminator a DP-GAN trained (None for other generators)."""
        return self.generator.discriminator_of(self.state)

    @property
    def measurements(self) -> list[Measurement]:
        """The noisy marginals the fit measured (none for generators that measure none)."""
        return self.generator.measurements_of(self.state)

    @property
    def precision(self) -> dict[str, dict] | None:
        """Each continuous column's candidate recording steps and the DP shares of its values
        on them and at zero (None for generators that measure none)."""
        return self.generator.precision_of(self.state)


class Generator(ABC):
    """Fit under (epsilon, delta) on the encoded real table; the fit samples encoded rows."""

    name: ClassVar[str]
    has_discriminator: ClassVar[bool] = False
    # Generators whose whole spend is one rho-zCDP Gaussian mechanism when delta > 0 (their
    # share is given as the (epsilon, delta) whose conversion is that rho, `privacy.zcdp`).
    zcdp_with_delta: ClassVar[bool] = False
    # Generators that train for many steps accept `progress=True` (a progress bar).
    shows_progress: ClassVar[bool] = False
    # Modules the generator imports lazily, to import up front before several threads fit
    # (`preload`): scikit-learn reads `sys.modules["polars"]` without the import lock, so a
    # thread importing polars for OpenDP broke another thread's scikit-learn fit.
    lazy_imports: ClassVar[tuple[str, ...]] = ()
    # The optional dependency group (pyproject's extras) the generator needs, if any.
    extra: ClassVar[str | None] = None

    @classmethod
    def require_extra(cls) -> None:
        """InputError naming the extra to install when the generator's is missing."""
        if cls.extra is not None:
            require(cls.extra, f"generator {cls.name!r}")

    @classmethod
    def preload(cls) -> None:
        """Import the generator's lazily imported modules now (in the calling thread)."""
        for module in cls.lazy_imports:
            importlib.import_module(module)

    def __init__(self, encoder: Encoder, epsilon: float, delta: float) -> None:
        self.require_extra()
        if not epsilon > 0:
            raise ValueError(f"{self.name}: epsilon must be positive")
        self.encoder = encoder
        self.epsilon = epsilon
        self.delta = delta

    @abstractmethod
    def planned_spends(self) -> list[PlannedSpend]:
        """The spends `fit` will make, calibrated from public quantities only."""

    @abstractmethod
    def _fit(self, real: np.ndarray, noise: NoiseSource) -> tuple[Any, list[PlannedSpend]]:
        """Fit on encoded real rows; return the DP state and the actual spends."""

    @abstractmethod
    def _sample(self, state: Any, n: int, rng: np.random.Generator) -> np.ndarray:
        """Draw n encoded rows from a fitted state (post-processing of the DP state)."""

    def config(self) -> dict:
        """Public configuration for the manifest."""
        return {"generator": self.name}

    def discriminator_of(self, state: Any) -> Discriminator | None:
        """The probabilistic discriminator of a fitted state, for generators that train one."""
        return None

    def measurements_of(self, state: Any) -> list[Measurement]:
        """The noisy marginals a fitted state was built from (module docstring)."""
        return []

    def precision_of(self, state: Any) -> dict[str, dict] | None:
        """Column -> its candidate steps, the shares of its nonzero values on each ("none"
        last) and its share of zeros (`generators.lattice.Lattice.record`), for the continuous
        columns a fitted state decodes on a measured lattice; None where the generator
        measures none."""
        return None

    def spend(
        self,
        mechanism: str,
        description: Mechanism,
        epsilon: float,
        delta: float = 0.0,
        **params: Any,
    ) -> PlannedSpend:
        """A spend of this generator; its manifest params start with the component and the
        generator's name."""
        return PlannedSpend(
            mechanism=mechanism,
            epsilon=epsilon,
            delta=delta,
            params={"component": "generator", "generator": self.name, **params},
            description=description,
        )

    def laplace_spend(
        self, mechanism: str, epsilon: float, scale: float, sensitivity: float, **params: Any
    ) -> PlannedSpend:
        """Noisy histograms: Laplace of `scale` on counts of L1 `sensitivity` (pure epsilon)."""
        return self.spend(
            mechanism,
            Laplace(scale, sensitivity),
            epsilon,
            laplace_scale=scale,
            l1_sensitivity=sensitivity,
            **params,
        )

    def fit(self, real: np.ndarray, noise: NoiseSource | None = None) -> FittedGenerator:
        if real.ndim != 2 or real.shape[1] != self.encoder.width:
            raise ValueError(f"expected encoded rows with {self.encoder.width} features")
        state, spends = self._fit(real, noise or NoiseSource())
        return FittedGenerator(self, state, tuple(spends))


class CountsGenerator(Generator):
    """A generator fitted from the exact counts of public cells (see the module docstring)."""

    @abstractmethod
    def cell_counts(self, real: np.ndarray) -> list[np.ndarray]:
        """Exact counts of every public cell the mechanism measures (zeros included)."""

    @abstractmethod
    def _fit_counts(
        self, counts: list[np.ndarray], noise: NoiseSource
    ) -> tuple[Any, list[PlannedSpend]]:
        """Fit from exact counts (noise drawn here, once); return the state and spends."""

    def fit_counts(
        self, counts: list[np.ndarray], noise: NoiseSource | None = None
    ) -> FittedGenerator:
        """Fit from counts summed outside; they must have the shapes `cell_counts` returns."""
        expected = [c.shape for c in self.cell_counts(np.zeros((0, self.encoder.width)))]
        if [np.shape(c) for c in counts] != expected:
            raise ValueError("counts do not match the generator's public cells")
        state, spends = self._fit_counts(counts, noise or NoiseSource())
        return FittedGenerator(self, state, tuple(spends))

    def _fit(self, real: np.ndarray, noise: NoiseSource) -> tuple[Any, list[PlannedSpend]]:
        return self._fit_counts(self.cell_counts(real), noise)
