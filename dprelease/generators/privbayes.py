"""PrivBayes (Zhang et al. 2017): a DP Bayesian network over the discretised public domain.

Domain. Every column is discretised into its public cells (`domain.public_cells`: schema
categories; numeric columns in `bins` equal-width bins of the scaled value, one cell per
value for small integer ranges, plus a "missing" cell for nullable columns). Nothing is read
from the data.

Structure (the paper's GreedyBayes). The first attribute X_1 is drawn uniformly
at random (independently of the data). Step i = 2..d picks, among every remaining attribute X
and every parent set P of min(k, i - 1) attributes already placed, one pair (X, P) with the
exponential mechanism (McSherry and Talwar 2007) at epsilon_1 / (d - 1), epsilon_1 =
`structure_fraction` * epsilon. Score: the paper's R score in count units,

    S(X, P) = n * R(X, P) = 1/2 sum_{x, p} | c(x, p) - c(x) c(p) / n |,

c the cell counts of the real table and n their total. Deviation from the paper, and why: the
paper's sensitivities (for mutual information and for R) are for substitution neighbours with
a known n, and they grow without bound as n shrinks; under add/remove-one (docs/privacy-model.md
section 1) n is private and may be anything. In count units the sensitivity is bounded without
n: adding a row changes sum |c' - c| by 1, and the table of products c(x) c(p) / n, whose
entries sum to n, moves in L1 by at most n/(n+1) + (2n + 1)/(n + 1) < 3 (expand
(c(x) + a_x)(c(p) + b_p)/(n + 1) - c(x) c(p)/n with one-hot a, b), so |S(D') - S(D)| <= (1 + 3)/2
= 2 =: Delta_S for every n (n = 0 included, S = 0 there). The mechanism picks j with
probability proportional to exp(epsilon_1 / (d - 1) * S_j / (2 Delta_S)), sampled by the
`NoiseSource` (`noisy_max`: Gumbel-max from OS entropy; with --secure-noise OpenDP's report
noisy max with exponential noise at the same epsilon, applied to the scores). When
d <= k + 1 the network is the full joint whatever the order: no structure is learnt and all
of epsilon goes to the table.

Tables (the paper's NoisyConditionals). The network needs the joint of
(X_1 .. X_{k+1}) (it gives the conditionals of the first k + 1 attributes) and, for
i = k + 2 .. d, the joint of (X_i, P_i): m = max(1, d - k) tables. Adding or removing a row
changes one cell of each table by 1, so the vector of all m tables' counts has L1 sensitivity
m, and Laplace noise of scale m / epsilon_2 (epsilon_2 = epsilon - epsilon_1) on EVERY cell of
every table (the full public domain of child and parents, empty cells included) is
epsilon_2-DP. The paper noises the tables as probabilities, at a scale divided by n, which is
private here; noising counts needs no n. Negative counts are clipped to 0, each table is
normalised, and the conditionals Pr[X_i | P_i] are read off it (a parent configuration with no
mass gets a uniform conditional): post-processing. The whole generator is pure
epsilon-DP by basic composition; the split is `structure_fraction`, default 0.3 (the paper's
beta = 0.3).

Degree. The paper picks k by "theta-usefulness", which needs the private n; here k is a public
option, `degree`, default 1 (a tree). On the census demo table k = 1 beats k = 2 in 1- and
2-way marginal distance at n = 5,000 and 30,000 and epsilon 1 and 10
(docs/decisions/0023-other-generators-defaults.md): the R score, like mutual information,
grows with the table size even between independent columns, so k = 2 picks large parent sets
whose sparse tables the noise then flattens. Use degree >= 2 for higher-order dependencies
(e.g. y = x1 xor x2) and large tables. Memory: a table has the product of k + 1 column sizes
cells; if the largest possible table exceeds `max_cells` the generator refuses at construction,
before any data is read.

Sampling is ancestral: the first table jointly, then every child given its sampled parents,
then a value uniform in each numeric bin.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass
from itertools import combinations

import numpy as np

from dprelease.encoding import Encoder
from dprelease.errors import InputError
from dprelease.generators.base import Generator, Measurement
from dprelease.generators.domain import cell_index, normalise, public_cells, write_cells
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.calibration import laplace_scale
from dprelease.privacy.mechanisms import PureEpsilon
from dprelease.privacy.noise import NoiseSource

DEFAULT_DEGREE = 1
DEFAULT_BINS = 16
DEFAULT_STRUCTURE_FRACTION = 0.3
DEFAULT_MAX_CELLS = 1_000_000
SCORE_SENSITIVITY = 2.0  # of the count-scaled R score under add/remove-one (module docstring)


@dataclass(frozen=True)
class NoisyTable:
    """A noisy joint distribution over the cells of `attrs` (column positions), normalised."""

    attrs: tuple[int, ...]
    probabilities: np.ndarray  # shape: the cell counts of attrs, in that order
    noisy_total: float  # sum of the noisy counts (a DP estimate of the row count)


@dataclass(frozen=True)
class Network:
    """The fitted (DP) Bayesian network: sampling order, parent sets and noisy tables."""

    order: list[int]
    parents: list[tuple[int, ...]]
    tables: list[NoisyTable]


class PrivBayes(Generator):
    """Bayesian network of degree k with noisy conditional tables (pure epsilon-DP)."""

    name = "privbayes"

    def __init__(
        self,
        encoder: Encoder,
        epsilon: float,
        delta: float = 0.0,
        *,
        degree: int = DEFAULT_DEGREE,
        bins: int = DEFAULT_BINS,
        structure_fraction: float = DEFAULT_STRUCTURE_FRACTION,
        max_cells: int = DEFAULT_MAX_CELLS,
    ) -> None:
        super().__init__(encoder, epsilon, delta)
        if degree < 1:
            raise ValueError("degree must be at least 1")
        if bins < 1:
            raise ValueError("bins must be at least 1")
        if not 0 < structure_fraction < 1:
            raise ValueError("structure_fraction must be in (0, 1)")
        self.degree = degree
        self.bins = bins
        self.max_cells = max_cells
        self.cells = [public_cells(column, bins) for column in encoder.columns]
        sizes = sorted((c.size for c in self.cells), reverse=True)
        self.largest_table = math.prod(sizes[: degree + 1])
        if self.largest_table > max_cells:
            raise InputError(
                f"privbayes: a table over {min(degree + 1, len(sizes))} columns can have "
                f"{self.largest_table:,} cells, more than max_cells={max_cells:,}; lower "
                "degree or bins, or raise max_cells"
            )
        d = len(self.cells)
        self.learns_structure = d > degree + 1
        self.structure_fraction = structure_fraction if self.learns_structure else 0.0
        self.structure_epsilon = epsilon * self.structure_fraction
        self.table_epsilon = epsilon - self.structure_epsilon
        self.n_tables = max(1, d - degree)
        self.table_scale = laplace_scale(float(self.n_tables), self.table_epsilon)

    def config(self) -> dict:
        return {
            "generator": self.name,
            "degree": self.degree,
            "bins": self.bins,
            "structure_fraction": self.structure_fraction,
            "max_cells": self.max_cells,
            "cells_per_column": {c.column.name: c.size for c in self.cells},
        }

    def named(self, network: Network) -> list[tuple[str, tuple[str, ...]]]:
        """(child, parents) by column name, in sampling order (a DP output)."""
        names = [c.column.name for c in self.cells]
        return [
            (names[child], tuple(names[p] for p in parents))
            for child, parents in zip(network.order, network.parents, strict=True)
        ]

    def planned_spends(self) -> list[PlannedSpend]:
        spends = []
        if self.learns_structure:
            selections = len(self.cells) - 1
            spends.append(
                self.spend(
                    "exponential-mechanism",
                    PureEpsilon(self.structure_epsilon / selections, selections),
                    self.structure_epsilon,
                    degree=self.degree,
                    score="count-scaled R (n * R)",
                    sensitivity=SCORE_SENSITIVITY,
                    selections=selections,
                    epsilon_per_selection=self.structure_epsilon / selections,
                )
            )
        spends.append(
            self.laplace_spend(
                "laplace-histograms",
                self.table_epsilon,
                self.table_scale,
                float(self.n_tables),
                degree=self.degree,
                tables=self.n_tables,
                max_cells_per_table=self.largest_table,
            )
        )
        return spends

    def _fit(self, real: np.ndarray, noise: NoiseSource) -> tuple[Network, list[PlannedSpend]]:
        cells = np.stack([cell_index(c, real) for c in self.cells], axis=1)
        if self.learns_structure:
            order, parents = self._greedy_bayes(cells, noise)
        else:
            order = list(range(len(self.cells)))
            parents = [tuple(order[:i]) for i in range(len(order))]
        k = self.degree
        table_attrs = [tuple(order[: k + 1])] + [
            (child, *parent_set)
            for child, parent_set in zip(order[k + 1 :], parents[k + 1 :], strict=True)
        ]
        tables = [self._noisy_table(attrs, cells, noise) for attrs in table_attrs]
        return Network(order, parents, tables), self.planned_spends()

    def _shape(self, attrs: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(self.cells[a].size for a in attrs)

    def _counts(self, attrs: tuple[int, ...], cells: np.ndarray) -> np.ndarray:
        """Counts of every cell of the joint public domain of `attrs` (zeros included)."""
        shape = self._shape(attrs)
        flat = np.ravel_multi_index(tuple(cells[:, a] for a in attrs), shape)
        return np.bincount(flat, minlength=math.prod(shape)).reshape(shape).astype(float)

    def _noisy_table(
        self, attrs: tuple[int, ...], cells: np.ndarray, noise: NoiseSource
    ) -> NoisyTable:
        noisy = noise.add_laplace(self._counts(attrs, cells), self.table_scale, counts=True)
        return NoisyTable(attrs, normalise(np.clip(noisy, 0.0, None)), float(noisy.sum()))

    def measurements_of(self, state: Network) -> list[Measurement]:
        names, std = [c.column.name for c in self.cells], self.table_scale * math.sqrt(2.0)
        return [
            Measurement(
                tuple(names[a] for a in table.attrs),
                table.probabilities.size,
                "laplace",
                std,
                table.noisy_total,
            )
            for table in state.tables
        ]

    def _greedy_bayes(
        self, cells: np.ndarray, noise: NoiseSource
    ) -> tuple[list[int], list[tuple[int, ...]]]:
        d = len(self.cells)
        epsilon_step = self.structure_epsilon / (d - 1)
        order = [secrets.randbelow(d)]
        parents: list[tuple[int, ...]] = [()]
        while len(order) < d:
            candidates = [
                (child, parent_set)
                for child in range(d)
                if child not in order
                for parent_set in combinations(order, min(self.degree, len(order)))
            ]
            scores = np.array([self._score(c, p, cells) for c, p in candidates])
            child, parent_set = candidates[noise.noisy_max(scores, epsilon_step, SCORE_SENSITIVITY)]
            order.append(child)
            parents.append(parent_set)
        return order, parents

    def _score(self, child: int, parent_set: tuple[int, ...], cells: np.ndarray) -> float:
        """n R(X, P) = 1/2 sum |c(x, p) - c(x) c(p) / n| (sensitivity 2, module docstring)."""
        counts = self._counts((child, *parent_set), cells).reshape(self.cells[child].size, -1)
        n = counts.sum()
        if n == 0:
            return 0.0
        product = np.outer(counts.sum(axis=1), counts.sum(axis=0)) / n
        return 0.5 * float(np.abs(counts - product).sum())

    def _sample(self, state: Network, n: int, rng: np.random.Generator) -> np.ndarray:
        chosen = np.zeros((n, len(self.cells)), dtype=np.int64)
        first = state.tables[0]
        flat = rng.choice(first.probabilities.size, size=n, p=first.probabilities.ravel())
        for attr, index in zip(
            first.attrs, np.unravel_index(flat, first.probabilities.shape), strict=True
        ):
            chosen[:, attr] = index
        for table in state.tables[1:]:
            child, parents = table.attrs[0], table.attrs[1:]
            joint = table.probabilities.reshape(self.cells[child].size, -1)
            mass = joint.sum(axis=0)
            conditional = np.where(mass > 0, joint, 1.0)
            conditional = conditional / conditional.sum(axis=0)
            parent_flat = np.ravel_multi_index(
                tuple(chosen[:, p] for p in parents), self._shape(parents)
            )
            cdf = np.cumsum(conditional[:, parent_flat].T, axis=1)
            draws = (rng.random(n)[:, None] > cdf).sum(axis=1)
            chosen[:, child] = np.minimum(draws, joint.shape[0] - 1)
        out = np.zeros((n, self.encoder.width))
        for position, cells in enumerate(self.cells):
            write_cells(out, cells, chosen[:, position], rng)
        return out
