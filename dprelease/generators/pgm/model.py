"""The tree-structured graphical model of the `pgm` generator, built from noisy tables only.

Everything here is post-processing of DP outputs (noisy counts) and public quantities (the
schema's cells, the noise scales): the structure, the resolutions, the conditional tables and
the samples (docs/privacy-model.md section 6).

The model (a tree-augmented Bayesian network on the target, Friedman, Geiger and Goldszmidt
1997, fitted to noisy marginals as in Private-PGM, McKenna et al. 2019):

    p(x) = p(y) p(x_r | y) prod_{j != r} p(x_j | x_pa(j), y),

over the target y and a tree on the features chosen as the maximum spanning tree of the
mutual information of the noisy feature pairs (Chow and Liu 1968; MST, McKenna et al. 2021,
selects its tree from noisy measurements too). Each conditional is estimated at a COARSE
resolution (consecutive public cells grouped, `coarsening`) and refined to the FINE public
cells within each coarse cell with the column's noisy one-way histogram, so one-way
marginals keep their fine resolution while the dependence is estimated where the noise
allows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from dprelease.generators.domain import ColumnCells
from dprelease.generators.lattice import Lattice
from dprelease.generators.pgm.latent import coupled_scores, latent_positions, local_correlations
from dprelease.generators.sampling import draw_rows, stratified_choice, systematic_uniforms


def coarsening(cells: ColumnCells, groups: int, shares: np.ndarray | None = None) -> np.ndarray:
    """Coarse cell of every fine cell of a column (`consecutive_groups`; the last cell of a
    nullable column, its "missing" cell, is a group of its own)."""
    return consecutive_groups(cells.size, groups, shares, missing=cells.column.spec.nullable)


def consecutive_groups(
    size: int, groups: int, shares: np.ndarray | None = None, *, missing: bool = False
) -> np.ndarray:
    """Group of each of `size` ordered cells: consecutive non-missing cells in at most
    `groups` groups, the last cell its own group when `missing`. Without `shares` (or with a
    group per cell), groups of (nearly) equal numbers of cells. With `shares` (DP shares of
    the cells: post-processing), groups of nearly equal mass: cell i joins group
    floor(groups x (C_i - p_i / 2)), C_i the cumulative share, so a skewed column's
    dependence is measured where its rows are. (A column with a quarter of its rows at 0 in a
    0-3,500 range gets its zeros their own coarse cell at 2 groups, where equal widths put
    0-1,750 together: credit card's expenditure, whose zeros are the target's "no".)"""
    regular = size - int(missing)
    groups = max(1, min(groups, regular))
    if shares is None or groups == regular:
        mapping = (np.arange(regular) * groups) // regular
    else:
        p = np.clip(np.asarray(shares[:regular], dtype=float), 0.0, None)
        p = p / p.sum() if p.sum() > 0 else np.full(regular, 1.0 / regular)
        middle = np.cumsum(p) - p / 2
        raw = np.clip(np.floor(groups * middle), 0, groups - 1).astype(np.int64)
        mapping = np.concatenate([[0], np.cumsum(np.diff(raw) > 0)])  # no empty groups
    if missing:
        mapping = np.concatenate([mapping, [int(mapping.max()) + 1]])
    return mapping.astype(np.int64)


def coarsen(table: np.ndarray, axis: int, mapping: np.ndarray) -> np.ndarray:
    """Sum a table's fine cells along `axis` into the coarse cells of `mapping`."""
    moved = np.moveaxis(table, axis, 0)
    out = np.zeros((int(mapping.max()) + 1,) + moved.shape[1:])
    np.add.at(out, mapping, moved)
    return np.moveaxis(out, 0, axis)


def mutual_information(table: np.ndarray) -> float:
    """Mutual information of a noisy 2-way table (negative counts clipped, normalised)."""
    p = np.clip(table, 0.0, None) + 1e-12
    p = p / p.sum()
    outer = p.sum(axis=1, keepdims=True) * p.sum(axis=0, keepdims=True)
    return float(np.sum(p * np.log(p / outer)))


def maximum_spanning_tree(n: int, weight: dict[tuple[int, int], float], root: int) -> list[int]:
    """Parent of each of n nodes (-1 for `root`) in a maximum-weight spanning tree (Prim)."""
    parent = [-1] * n
    best = np.full(n, -np.inf)
    best_from = np.full(n, -1)
    in_tree = np.zeros(n, dtype=bool)
    node = root
    for _ in range(n - 1):
        in_tree[node] = True
        for other in range(n):
            if not in_tree[other]:
                w = weight[(min(node, other), max(node, other))]
                if w > best[other]:
                    best[other], best_from[other] = w, node
        candidates = np.where(~in_tree, best, -np.inf)
        node = int(np.argmax(candidates))
        parent[node] = int(best_from[node])
    return parent


def conditional(noisy: np.ndarray, prior: np.ndarray, pseudo_count: float) -> np.ndarray:
    """p(last axis | leading axes) from noisy counts: negative counts clipped, smoothed by
    `pseudo_count` draws from `prior` (the column's noisy one-way shares at this resolution),
    so cells the noise wiped out fall back to the one-way distribution."""
    smoothed = np.clip(noisy, 0.0, None) + pseudo_count * prior
    return smoothed / smoothed.sum(axis=-1, keepdims=True)


@dataclass(frozen=True)
class Node:
    """One feature's conditional: p(coarse x | coarse parent, coarse y), the parent (None for
    the root), the fine-to-coarse maps of the column and of its parent in this table."""

    column: int
    parent: int | None
    table: np.ndarray  # (y groups, parent groups or 1, column groups)
    groups: np.ndarray
    parent_groups: np.ndarray | None
    latent_correlations: np.ndarray | None = None  # per column group: coupling (`couple`)


@dataclass(frozen=True)
class TreeModel:
    """The fitted state: every column's fine cells and one-way shares over them, the
    target's coarse map and the feature nodes in sampling order (a parent before its
    children)."""

    cells: list[ColumnCells]
    one_way: list[np.ndarray]
    target: int | None
    target_groups: np.ndarray | None
    nodes: list[Node]
    totals: list[float]
    edges: list[tuple[int, int]]
    resolutions: dict[int, int]
    lattices: dict[int, Lattice]  # continuous columns' measured precision (`lattice`)


def refine(
    coarse: np.ndarray,
    groups: np.ndarray,
    fine_shares: np.ndarray,
    rng: np.random.Generator,
    scores: np.ndarray | None = None,
) -> np.ndarray:
    """A fine cell within each drawn coarse cell, in proportion to the one-way shares
    (stratified within each coarse cell, `systematic_uniforms`; with `scores`, the rows of a
    coarse cell get its fine cells in the order of their scores, `pgm.latent`)."""
    within = np.where(groups[None, :] == np.arange(groups.max() + 1)[:, None], fine_shares, 0.0)
    totals = within.sum(axis=1, keepdims=True)
    uniform = (groups[None, :] == np.arange(groups.max() + 1)[:, None]).astype(float)
    within = np.where(totals > 0, within, uniform)
    return draw_rows(within[coarse], systematic_uniforms(coarse, rng, scores))


def sample_cells(model: TreeModel, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Fine cells of n rows for every column, drawn down the tree; each conditional draw is
    stratified within the rows that share its condition (`systematic_uniforms`), and a
    coupled feature's fine cells go to the rows of each coarse cell in the order of their
    latent target (`couple`, `pgm.latent`)."""
    chosen: dict[int, np.ndarray] = {}
    latent_y = None
    if model.target is None:
        y_coarse = np.zeros(n, dtype=np.int64)
    else:
        assert model.target_groups is not None  # a target has its groups
        chosen[model.target] = stratified_choice(model.one_way[model.target], n, rng)
        y_coarse = model.target_groups[chosen[model.target]]
        if any(node.latent_correlations is not None for node in model.nodes):
            target = model.cells[model.target]
            latent_y = latent_positions(
                model.one_way[model.target], chosen[model.target], target.column.spec.nullable, rng
            )
    for node in model.nodes:
        if node.parent is None:
            parent_coarse = np.zeros(n, dtype=np.int64)
        else:
            assert node.parent_groups is not None  # a parent has its groups
            parent_coarse = node.parent_groups[chosen[node.parent]]
        condition = y_coarse * node.table.shape[1] + parent_coarse
        coarse = draw_rows(node.table[y_coarse, parent_coarse], systematic_uniforms(condition, rng))
        scores = None
        if node.latent_correlations is not None:
            assert latent_y is not None  # coupled nodes have the target's latent positions
            scores = coupled_scores(node.latent_correlations[coarse], latent_y, rng)
        chosen[node.column] = refine(coarse, node.groups, model.one_way[node.column], rng, scores)
    return [chosen[j] for j in range(len(model.one_way))]


def couple(
    nodes: list[Node], cells: list[ColumnCells], target: int | None, y_shares: np.ndarray
) -> list[Node]:
    """Every ordered feature's latent correlations with an ordered target near each of its
    coarse cells (`pgm.latent.local_correlations`), from the model's coarse joint table of
    the two, computed down the tree; a nullable column's missing cell (its last coarse
    cell) left out. Nodes unchanged without a target or with a categorical one (no order to
    couple to); None for a categorical feature."""
    if target is None or cells[target].edges is None:
        return nodes
    y_regular = y_shares.size - int(cells[target].column.spec.nullable)
    joint: dict[int, np.ndarray] = {}  # column -> p(coarse y, coarse column)
    coupled = []
    for node in nodes:
        parent_joint = y_shares[:, None] if node.parent is None else joint[node.parent]
        joint[node.column] = np.einsum("yp,ypx->yx", parent_joint, node.table)
        feature, rho = cells[node.column], None
        if feature.edges is not None:
            x_regular = node.table.shape[2] - int(feature.column.spec.nullable)
            rho = np.zeros(node.table.shape[2])  # a missing cell: no coupling
            rho[:x_regular] = local_correlations(joint[node.column][:y_regular, :x_regular])
        coupled.append(replace(node, latent_correlations=rho))
    return coupled


def match_one_way(
    nodes: list[Node], one_way: list[np.ndarray], y_shares: np.ndarray, iterations: int = 10
) -> list[Node]:
    """Conditionals rescaled so that the model's coarse one-way marginal of every feature is
    the noisy one-way histogram's (iterative proportional fitting down the tree, Deming and
    Stephan 1940): the one-way histograms are measured at the finest resolution and are the
    release's most precise statistics, so sampled rows keep them while the tables keep the
    dependence."""
    joint: dict[int, np.ndarray] = {}  # column -> p(coarse y, coarse column)
    matched = []
    for node in nodes:
        parent_joint = y_shares[:, None] if node.parent is None else joint[node.parent]
        target = coarsen(one_way[node.column], 0, node.groups)
        table = node.table
        for _ in range(iterations):
            implied = np.einsum("yp,ypx->x", parent_joint, table)
            table = table * np.where(implied > 0, target / np.maximum(implied, 1e-300), 1.0)
            table = table / np.maximum(table.sum(axis=-1, keepdims=True), 1e-300)
        joint[node.column] = np.einsum("yp,ypx->yx", parent_joint, table)
        matched.append(replace(node, table=table))
    return matched


@dataclass(frozen=True)
class CoarseSum:
    """A noisy table summed to one column's coarse cells: `counts` per coarse cell of
    `mapping`, each with noise variance `variance` (the table's cell variance times the
    cells summed)."""

    column: int
    mapping: np.ndarray
    counts: np.ndarray
    variance: float


def axis_sums(
    noisy: np.ndarray, axes: list[tuple[int, np.ndarray] | None], variance: float
) -> list[CoarseSum]:
    """A noisy table's sums over all its axes but one, for every axis that is a column (its
    `(column, mapping)` in `axes`; None for an axis that is not): that column's coarse totals
    measured again, each a sum of size / shape[axis] cells of noise variance `variance`."""
    out = []
    for axis, entry in enumerate(axes):
        if entry is None:
            continue
        others = tuple(a for a in range(noisy.ndim) if a != axis)
        summed = noisy.size // noisy.shape[axis]
        out.append(CoarseSum(entry[0], entry[1], noisy.sum(axis=others), variance * summed))
    return out


def node_sums(
    node: Node,
    noisy: np.ndarray,
    target: int | None,
    target_groups: np.ndarray | None,
    variance: float,
) -> list[CoarseSum]:
    """A model table's sums over its other axes: its columns' coarse totals again
    (`pooled_one_way`), each coarse cell a sum of cells of noise variance `variance`."""
    axes = [(target, target_groups), (node.parent, node.parent_groups), (node.column, node.groups)]
    maps = [None if column is None or m is None else (column, m) for column, m in axes]
    return axis_sums(noisy, maps, variance)


def pooled_one_way(
    one_way: list[np.ndarray], variance: float, total: float, sums: list[CoarseSum]
) -> list[np.ndarray]:
    """One-way shares that also use the other rounds' tables (post-processing).

    Each selection or model table, summed over its other axes, measures its columns' coarse
    totals again, over that table's partition of the column's fine cells. Per column, the
    atoms are the common refinement of those partitions (fine cells grouped by the coarse
    cell they fall in under every partition); the atom shares a are the least-squares
    estimate from all measurements (Private-PGM pools every measurement of a marginal the
    same way): round 1's atom share (variance about m v1 / N^2 for an atom of m fine cells, v1
    the round-1 cell variance: an over-statement, the smoothing lowers it) and every table's
    z_k / N = A_k a + noise (variance v_k / N^2, A_k summing atoms into its coarse cells), i.e.
    (D + sum A_k^T A_k N^2 / v_k) a = D a1 + sum A_k^T z_k N / v_k with D the round-1
    precisions. The fine shares within an atom are scaled by the new a / a1, so round 1's fine
    shape is kept; with one partition the atoms are its coarse cells and this is their
    inverse-variance average."""
    by_column: dict[int, list[CoarseSum]] = {}
    for item in sums:
        by_column.setdefault(item.column, []).append(item)
    pooled = list(one_way)
    for column, items in by_column.items():
        shares = one_way[column]
        keys = np.stack([item.mapping for item in items], axis=1)
        _, atom_of = np.unique(keys, axis=0, return_inverse=True)
        atom_of = atom_of.ravel()
        atoms = int(atom_of.max()) + 1
        own = np.bincount(atom_of, weights=shares, minlength=atoms)
        precision = np.diag(total**2 / (np.bincount(atom_of, minlength=atoms) * variance))
        rhs = precision @ own
        for item in items:
            design = np.zeros((int(item.mapping.max()) + 1, atoms))
            design[item.mapping, atom_of] = 1.0  # atom -> its coarse cell (fine cells agree)
            precision = precision + design.T @ design * total**2 / item.variance
            rhs = rhs + design.T @ item.counts * total / item.variance
        estimate = np.clip(np.linalg.solve(precision, rhs), 0.0, None)
        scale = np.where(own > 0, estimate / np.maximum(own, 1e-300), 0.0)
        fine = shares * scale[atom_of]
        pooled[column] = fine / fine.sum() if fine.sum() > 0 else shares
    return pooled
