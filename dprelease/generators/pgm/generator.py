"""Private graphical model ("pgm"): the default generator.

A noisy count and three rounds of noisy marginals, then a tree-augmented Bayesian network
fitted to them (`pgm.model`; Private-PGM's idea of estimating a graphical model from noisy
marginals, McKenna et al. 2019, with MST's noisy structure selection, McKenna et al. 2021):

0. count: the number of rows, with 1 % of the budget; it chooses the one-way cells
   (`pgm.cells`);
1. one-way: the histogram of every column over its FINE public cells (`domain.public_cells`,
   16 bins for a numeric column, plus an integer column's two bounds in cells of their own,
   one cell per value for an integer domain of at most 16 values; up to 64 on large
   tables, `pgm.cells`), a numeric column's cells smoothed with a
   kernel chosen by Stein's unbiased risk estimate, a feature's empty tails set to zero on
   64 or 32 cells, projected onto the simplex of its noisy total, a count target's stray
   runs far from its body set to zero (`pgm.one_way`);
2. selection (three or more features): every pair of features at 4 x 4 coarse cells, and
   the target (in its m_y groups, round 3) x every feature at 4 coarse cells; the maximum
   spanning tree of the pairs' noisy mutual information is the features' tree, rooted at
   the feature whose noisy table with the target has the largest mutual information (with
   fewer than three features, no selection round: a chain in the schema's order). The
   structure is chosen from DP outputs only (docs/decisions/0002-pgm-tree-root-from-dp-outputs.md;
   the tree's measurements: docs/decisions/0010-pgm-tree-selection.md);
3. model: the target in m_y groups x the tree's root, and the target x each feature x its
   tree parent, at a resolution the noise supports: each column gets
   b = clip(floor(sqrt(N / (3 sigma m_y))), 2, 16) coarse cells, so that an average cell holds
   at least 3 noise standard deviations (N: the noisy total of round 1). With no target, the
   same with a single target cell. The target's groups (`pgm.cells.model_target_groups`)
   are consecutive cells of nearly equal DP mass under its round-1 shares,
   m_y = clip(floor(N / (3 sigma 4)), 2, 8) of them (fewer where one cell holds more than
   1 / m_y of the mass), so that even b = 2 holds 3 SDs per average cell; its one-way shares
   keep their fine cells (it is counted on up to 16 public cells: its groups are
   post-processing of the noisy shares). Measurements of the resolutions:
   docs/decisions/0005-pgm-one-way-resolution.md and
   docs/decisions/0006-pgm-model-resolution-and-target-groups.md;
4. lattice (continuous columns without a codebook): each one's class histogram, the coarsest
   power of ten its values are multiples of, or zero (`lattice`), 1 % of the budget out of
   the one-way share; synthetic values are decoded onto the measured lattice in their cells
   (docs/decisions/0015-measured-lattice.md).

A feature's coarse cells in rounds 2 and 3 are consecutive fine cells of nearly equal mass
under its round-1 shares (`coarsening`; post-processing of DP outputs), not of equal width:
the dependence is measured where the rows are (a point mass such as a column's zeros gets a
cell of its own).

The one-way shares the model is matched to pool round 1 with rounds 2 and 3: every table
summed over its other axes measures its columns' coarse totals again (the target's once per
feature and round), and the shares are their least-squares estimate over the common
refinement of those coarse cells (`pooled_one_way`, post-processing; measurements of both
choices: docs/decisions/0004-pgm-coarse-cells-and-pooled-one-way-shares.md).

Sampling: down the tree from the target; inside its coarse cells an ordered feature is
coupled to an ordered target by a latent Gaussian copula, its correlation near each cell the
one the coarse table implies (`pgm.latent`): a slope finer than the cells is kept.

Privacy (docs/privacy-model.md section 6). Each table is a histogram: adding or removing one
row changes one cell by 1 (L2 and L1 sensitivity 1), whatever its resolution (a class
histogram too, `lattice`). With delta > 0 the rounds are Gaussian mechanisms, round s
measuring k_s tables with noise sigma_s = sqrt(k_s / (2 rho_s)), rho_s = share_s * rho:
rho-zCDP in total (Bun and Steinke 2016), converted to (epsilon, delta) with OpenDP's
conversion (`zcdp_rho`, as AIM and MST). With delta = 0 the rounds are Laplace mechanisms of
scale k_s / epsilon_s (pure epsilon-DP). Which cells round 1 measures depends on the noisy
count, and which tables rounds 2 and 3 measure, their resolution and the target's groups, on
earlier DP outputs only (the noisy total, shares and pairs); their noise does not, so the
planned spend is fixed before the data is read and the composition is the fixed one above
(zCDP and pure-DP composition hold for adaptively chosen queries of fixed parameters).

Streaming: the counting query (`cell_counts`) is summed over chunks (or a Dask reduction);
the rounds' tables are sums of it, so memory is bounded by the cells, not the rows (520 KB
per pair of 64-cell columns and a numeric target). Speed: closed-form after counting;
`benchmarks/generators.py` (30,000 rows, 8 columns) fits in 0.01 s, samples in 0.09 s.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Literal

import numpy as np

from dprelease.encoding import Encoder
from dprelease.generators.base import CountsGenerator, Measurement
from dprelease.generators.domain import cell_index, normalise, public_cells, write_cells
from dprelease.generators.lattice import Lattice, class_counts, has_lattice, kept_threshold
from dprelease.generators.pgm.cells import (
    FINER,
    SIGNAL_TO_NOISE,
    CountedCells,
    Resolution,
    model_feature_groups,
    model_target_groups,
)
from dprelease.generators.pgm.model import (
    CoarseSum,
    Node,
    TreeModel,
    coarsen,
    coarsening,
    conditional,
    couple,
    match_one_way,
    node_sums,
    pooled_one_way,
    sample_cells,
)
from dprelease.generators.pgm.one_way import denoised_shares
from dprelease.generators.pgm.tree import sampling_order, select_tree
from dprelease.privacy.accounting import PlannedSpend
from dprelease.privacy.mechanisms import ZCDP, PureEpsilon
from dprelease.privacy.noise import NoiseSource
from dprelease.privacy.zcdp import CONVERSION, zcdp_rho

DEFAULT_BINS = 16
COUNTED_TARGET_GROUPS = 16  # the target's cells in the counted tables (at most)
SELECTION_GROUPS = 4
# The rounds' shares of the budget (count, one-way, selection, model), chosen on the tuning
# tables; the count's 0.01 is out of the one-way share. A larger one-way share lowers every
# TVD1 but makes the wage table's target model worse, so it is not the default
# (measurements: docs/decisions/0003-pgm-round-shares.md).
SHARES = {"count": 0.01, "one-way": 0.39, "selection": 0.15, "model": 0.45}
SHARES_WITHOUT_SELECTION = {"count": 0.01, "one-way": 0.39, "selection": 0.0, "model": 0.6}
# The continuous columns' class histograms (`lattice`), where the schema has such columns,
# out of the one-way share: one-way noise SD x sqrt(0.39 / 0.38), 1.3 % more.
LATTICE_SHARE = 0.01


class PrivateGraphicalModel(CountsGenerator):
    """Noisy one-way, pair and target-interaction marginals, and a tree model fitted to them."""

    name = "pgm"
    zcdp_with_delta = True

    def __init__(
        self, encoder: Encoder, epsilon: float, delta: float = 0.0, *, bins: int = DEFAULT_BINS
    ) -> None:
        super().__init__(encoder, epsilon, delta)
        if bins < 2:
            raise ValueError("bins must be at least 2")
        self.bins = bins
        self.cells = [public_cells(column, bins) for column in encoder.columns]
        self.counted = CountedCells.of(self.cells, bins)
        names = [column.name for column in encoder.columns]
        target = encoder.schema.target
        self.target = names.index(target) if target in names else None
        self.features = [i for i in range(len(names)) if i != self.target]
        self.pairs = list(combinations(self.features, 2))
        self.target_groups = (
            None
            if self.target is None
            else coarsening(self.cells[self.target], COUNTED_TARGET_GROUPS)
        )
        self.lattice_columns = [j for j, c in enumerate(encoder.columns) if has_lattice(c)]
        shares = SHARES if len(self.features) >= 3 else SHARES_WITHOUT_SELECTION
        if self.lattice_columns:
            shares = shares | {
                "one-way": shares["one-way"] - LATTICE_SHARE,
                "lattice": LATTICE_SHARE,
            }
        self.shares = shares
        self.tables = {
            "count": 1,
            "one-way": len(self.cells),
            "selection": (
                len(self.pairs) + (len(self.features) if self.target is not None else 0)
                if self.shares["selection"]
                else 0
            ),
            "model": len(self.features),
            "lattice": len(self.lattice_columns),
        }
        self.gaussian = delta > 0
        if self.gaussian:
            self.rho, self.spent_epsilon = zcdp_rho(epsilon, delta)
        self.noise_std = {
            stage: self._stage_std(stage) for stage, count in self.tables.items() if count
        }

    def _stage_std(self, stage: str) -> float:
        """Noise standard deviation on each cell of a round's tables (module docstring)."""
        count, share = self.tables[stage], self.shares[stage]
        if self.gaussian:
            return math.sqrt(count / (2.0 * share * self.rho))
        return math.sqrt(2.0) * count / (share * self.epsilon)

    @property
    def _y_size(self) -> int:
        return 1 if self.target_groups is None else int(self.target_groups.max()) + 1

    def config(self) -> dict:
        return {
            "generator": self.name,
            "bins": self.bins,
            "budget_shares": {k: v for k, v in self.shares.items() if v},
            "noise_std": self.noise_std,
            "cells_per_column": {c.column.name: c.size for c in self.cells},
            "finer_cells_per_column": self.counted.refined(),
        }

    def planned_spends(self) -> list[PlannedSpend]:
        params: dict[str, Any] = {"tables": self.tables, "noise_std": self.noise_std}
        if self.gaussian:
            zcdp = ZCDP(self.rho)
            return [
                self.spend(
                    "zcdp-gaussian-marginals",
                    zcdp,
                    self.spent_epsilon,
                    self.delta,
                    **params,
                    rho=self.rho,
                    conversion=CONVERSION,
                )
            ]
        return [self.spend("laplace-histograms", PureEpsilon(self.epsilon), self.epsilon, **params)]

    def cell_counts(self, real: np.ndarray) -> list[np.ndarray]:
        """Exact counts over the counted (finest) cells: every column's histogram, target x
        feature, target x pair; then each continuous column's class histogram (`lattice`)."""
        index = [cell_index(cells, real) for cells in self.counted.counted]
        y = (
            np.zeros(len(real), dtype=np.int64)
            if self.target is None or self.target_groups is None
            else self.target_groups[self.counted.to_base[self.target][index[self.target]]]
        )
        counts = [
            np.bincount(i, minlength=c.size).astype(float)
            for i, c in zip(index, self.counted.counted, strict=True)
        ]
        sizes = [c.size for c in self.counted.counted]
        for j in self.features:
            counts.append(self._joint([y, index[j]], (self._y_size, sizes[j])))
        for j, k in self.pairs:
            shape = (self._y_size, sizes[j], sizes[k])
            counts.append(self._joint([y, index[j], index[k]], shape))
        columns = self.encoder.columns
        return counts + [class_counts(columns[j], real) for j in self.lattice_columns]

    @staticmethod
    def _joint(indices: list[np.ndarray], shape: tuple[int, ...]) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(indices), shape)
        return np.bincount(flat, minlength=math.prod(shape)).astype(float).reshape(shape)

    def _noisy(self, table: np.ndarray, stage: str, noise: NoiseSource) -> np.ndarray:
        std = self.noise_std[stage]
        if self.gaussian:
            return noise.add_gaussian(table, std, counts=True)
        return noise.add_laplace(table, std / math.sqrt(2.0), counts=True)

    def _fit_counts(
        self, counts: list[np.ndarray], noise: NoiseSource
    ) -> tuple[TreeModel, list[PlannedSpend]]:
        d = len(self.cells)
        noisy_count = float(self._noisy(np.array([counts[0].sum()]), "count", noise)[0])
        grid = self.grid(noisy_count)
        one_way_noisy = [
            self._noisy(grid.coarsen(c, {0: j}), "one-way", noise) for j, c in enumerate(counts[:d])
        ]
        total = max(float(np.median([c.sum() for c in one_way_noisy])), 1.0)
        std = self.noise_std["one-way"]
        trims = [j != self.target and c.size > self.cells[j].size for j, c in enumerate(grid.cells)]
        one_way = [
            denoised_shares(
                c,
                total,
                std,
                0 if cells.edges is None else len(cells.edges) - 1,
                trim_tails=trim,
                drop_strays=j == self.target and cells.wide_integer,
            )
            for j, (c, cells, trim) in enumerate(zip(one_way_noisy, grid.cells, trims, strict=True))
        ]
        by_target = {
            j: grid.coarsen(t, {1: j})
            for j, t in zip(self.features, counts[d : d + len(self.features)], strict=True)
        }
        pairs_start = d + len(self.features)
        pairs_end = pairs_start + len(self.pairs)
        by_pair = {
            (j, k): grid.coarsen(t, {1: j, 2: k})
            for (j, k), t in zip(self.pairs, counts[pairs_start:pairs_end], strict=True)
        }
        model_std = self.noise_std["model"]
        model_y = None
        if self.target is not None:  # the target's groups of DP mass (rounds 2 and 3)
            assert grid.target_groups is not None  # a target has its groups
            group_shares = coarsen(one_way[self.target], 0, grid.target_groups)
            nullable = grid.cells[self.target].column.spec.nullable
            y_map = model_target_groups(total, model_std, group_shares, nullable)
            by_target = {j: coarsen(t, 0, y_map) for j, t in by_target.items()}
            by_pair = {pair: coarsen(t, 0, y_map) for pair, t in by_pair.items()}
            model_y = y_map[grid.target_groups]
        parents, sums = self._tree(by_pair, by_target, one_way, noise, grid, model_y)
        y_size = 1 if model_y is None else int(model_y.max()) + 1
        groups = {
            j: model_feature_groups(total, model_std, y_size, grid.cells[j], one_way[j])
            for j in self.features
        }
        totals = [float(c.sum()) for c in one_way_noisy]
        nodes = []
        order = sampling_order(parents)
        for j in order:
            node, noisy = self._node(j, parents.get(j), groups, by_target, by_pair, one_way, noise)
            nodes.append(node)
            sums += node_sums(node, noisy, self.target, model_y, model_std**2)
        one_way = pooled_one_way(one_way, std**2, total, sums)
        y_shares = (
            np.ones(1)
            if model_y is None or self.target is None
            else coarsen(one_way[self.target], 0, model_y)
        )
        nodes = match_one_way(nodes, one_way, y_shares)
        nodes = couple(nodes, grid.cells, self.target, y_shares)
        edges = [(p, j) for j, p in parents.items() if p is not None]
        state = TreeModel(
            cells=grid.cells,
            one_way=one_way,
            target=self.target,
            target_groups=model_y,
            nodes=nodes,
            totals=totals,
            edges=edges,
            resolutions={j: int(g.max()) + 1 for j, g in groups.items()},
            lattices=self.lattices_of(counts[pairs_end:], noisy_count, noise),
        )
        return state, self.planned_spends()

    def lattices_of(
        self, counts: list[np.ndarray], noisy_count: float, noise: NoiseSource
    ) -> dict[int, Lattice]:
        """Round 4: the lattices of the continuous columns' class histograms `counts`
        (`class_counts`, in `lattice_columns` order), measured with this plan's noise and
        kept above `kept_threshold` for the noisy row count."""
        std = self.noise_std.get("lattice", 0.0)
        kept = kept_threshold(std, len(self.lattice_columns), noisy_count, gaussian=self.gaussian)
        return {
            j: Lattice.of(self.encoder.columns[j], self._noisy(c, "lattice", noise), kept)
            for j, c in zip(self.lattice_columns, counts, strict=True)
        }

    def grid(self, noisy_count: float) -> Resolution:
        """The finest of bins x 4, bins x 2 (numeric columns whose cells nest) at which an
        average one-way cell holds `SIGNAL_TO_NOISE` noise SDs under the noisy count, else the
        base cells (`pgm.cells` module docstring; post-processing of the noisy count)."""
        std = self.noise_std["one-way"]
        factor = next((f for f in FINER if noisy_count >= SIGNAL_TO_NOISE * std * self.bins * f), 1)
        return self.counted.resolution(factor, self.target, self.target_groups)

    def _tree(
        self,
        by_pair,
        by_target,
        one_way,
        noise: NoiseSource,
        grid: Resolution,
        model_y: np.ndarray | None,
    ) -> tuple[dict[int, int | None], list[CoarseSum]]:
        """Parent of each feature and the selection tables' coarse sums (`select_tree`; each
        feature in `SELECTION_GROUPS` groups of nearly equal DP mass). Without a selection
        round (fewer than three features) the features form a chain in the schema's order:
        choosing a root would need a measurement."""
        if not self.features:
            return {}, []
        if not self.shares["selection"]:
            chain = list(self.features)
            return {j: (chain[i - 1] if i else None) for i, j in enumerate(chain)}, []
        return select_tree(
            self.features,
            self.target,
            model_y,
            by_target,
            by_pair,
            {j: coarsening(grid.cells[j], SELECTION_GROUPS, one_way[j]) for j in self.features},
            lambda table: self._noisy(table, "selection", noise),
            self.noise_std["selection"] ** 2,
        )

    def _node(
        self, j, parent, groups, by_target, by_pair, one_way, noise
    ) -> tuple[Node, np.ndarray]:
        """Measure the target x feature (x parent) table at its resolution; its conditional and
        the noisy table."""
        g = groups[j]
        prior = normalise(coarsen(one_way[j], 0, g))
        if parent is None:
            table = coarsen(by_target[j], 1, g)[:, None, :]
            parent_groups = None
        else:
            parent_groups = groups[parent]
            if (parent, j) in by_pair:  # (target, parent, feature)
                table = by_pair[(parent, j)]
            else:
                table = np.swapaxes(by_pair[(j, parent)], 1, 2)
            table = coarsen(coarsen(table, 2, g), 1, parent_groups)
        noisy = self._noisy(table, "model", noise)
        node = Node(j, parent, conditional(noisy, prior, self.noise_std["model"]), g, parent_groups)
        return node, noisy

    def measurements_of(self, state: TreeModel) -> list[Measurement]:
        """The fine one-way histograms and the model round's tables (the accuracy statement
        grades what the release reproduces; the selection tables only choose the tree)."""
        kind: Literal["laplace", "gaussian"] = "gaussian" if self.gaussian else "laplace"
        one_way, std = self.noise_std["one-way"], self.noise_std["model"]
        out = [
            Measurement((c.column.name,), c.size, kind, one_way, total, (c.size,))
            for c, total in zip(state.cells, state.totals, strict=True)
        ]
        name, total = [c.name for c in self.encoder.columns], float(np.median(state.totals))
        for node in state.nodes:
            members = (self.target, node.parent, node.column)
            kept = [(k, i) for k, i in enumerate(members) if i is not None]
            columns = tuple(name[i] for _, i in kept)
            shape = tuple(int(node.table.shape[k]) for k, _ in kept)
            out.append(Measurement(columns, node.table.size, kind, std, total, shape))
        return out

    def precision_of(self, state: TreeModel) -> dict[str, dict]:
        return {
            state.cells[j].column.name: lattice.record() for j, lattice in state.lattices.items()
        }

    def _sample(self, state: TreeModel, n: int, rng: np.random.Generator) -> np.ndarray:
        out = np.zeros((n, self.encoder.width))
        chosen = sample_cells(state, n, rng)
        for j, (cells, column) in enumerate(zip(state.cells, chosen, strict=True)):
            write_cells(out, cells, column, rng, state.lattices.get(j))
        return out
