"""The `pgm` generator's structure: the tree over the features, chosen from the noisy
selection round (its module docstring, round 2). Post-processing of DP outputs only: every
table here passes through `measure` (the round's noise mechanism) before anything reads it
(docs/decisions/0002-pgm-tree-root-from-dp-outputs.md; the tree's measurements:
docs/decisions/0010-pgm-tree-selection.md).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dprelease.generators.pgm.model import (
    CoarseSum,
    axis_sums,
    coarsen,
    maximum_spanning_tree,
    mutual_information,
)


def select_tree(
    features: list[int],
    target: int | None,
    target_groups: np.ndarray | None,
    by_target: dict[int, np.ndarray],
    by_pair: dict[tuple[int, int], np.ndarray],
    selection: dict[int, np.ndarray],
    measure: Callable[[np.ndarray], np.ndarray],
    variance: float,
) -> tuple[dict[int, int | None], list[CoarseSum]]:
    """Parent of each feature, and every measured table's coarse sums (`pooled_one_way`).

    The maximum spanning tree of the noisy pairs' mutual information (each feature in the
    coarse groups `selection`), rooted at the feature whose noisy table with the target
    (target groups x selection groups) has the largest mutual information (the first
    feature without a target). `by_target` (target x feature) and `by_pair` (target x
    feature x feature) are exact counts: only their `measure`d (noisy) coarse tables are
    read. `variance`: the noise variance of one measured cell."""
    sums: list[CoarseSum] = []

    def measured(columns: tuple[int, int], table: np.ndarray) -> np.ndarray:
        noisy = measure(table)
        maps: list[tuple[int, np.ndarray] | None] = []
        for c in columns:
            groups = target_groups if c == target else selection[c]
            assert groups is not None  # a target has its groups
            maps.append((c, groups))
        sums.extend(axis_sums(noisy, maps, variance))
        return noisy

    root = features[0]
    if target is not None:
        scores = {
            j: mutual_information(measured((target, j), coarsen(table, 1, selection[j])))
            for j, table in by_target.items()
        }
        root = max(features, key=lambda j: scores[j])
    position = {j: i for i, j in enumerate(features)}
    weight = {}
    for (j, k), table in by_pair.items():
        pair = coarsen(coarsen(table.sum(axis=0), 0, selection[j]), 1, selection[k])
        weight[(position[j], position[k])] = mutual_information(measured((j, k), pair))
    parent = maximum_spanning_tree(len(features), weight, position[root])
    parents = {
        j: (None if parent[position[j]] < 0 else features[parent[position[j]]]) for j in features
    }
    return parents, sums


def sampling_order(parents: dict[int, int | None]) -> list[int]:
    """Features with every parent before its children (breadth first from the root)."""
    order = [j for j, p in parents.items() if p is None]
    while len(order) < len(parents):
        order += [j for j, p in parents.items() if p in order and j not in order]
    return order
