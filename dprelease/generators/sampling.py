"""Drawing synthetic cells from categorical distributions, stratified so that the drawn
counts carry the distribution's shares rather than a multinomial sampling error. Sampling is
post-processing of DP outputs: the random generator here is the caller's sampling generator,
never the DP noise source (measurements: docs/decisions/0012-stratified-sampling.md)."""

from __future__ import annotations

import numpy as np


def systematic_uniforms(
    keys: np.ndarray, rng: np.random.Generator, scores: np.ndarray | None = None
) -> np.ndarray:
    """One uniform per row, stratified within each key: the m rows of a key get a random
    permutation of (u + i) / m, i = 0..m-1, with one u ~ U[0, 1) per key (systematic
    sampling, Madow 1949; the resampling step of Carpenter, Clifford and Fearnhead 1999).
    With `scores`, the permutation is the rows' order by score within the key instead (the
    row with the k-th smallest score gets (u + k) / m: `pgm.latent`'s coupling); the key's
    uniforms, and so the cells an inverse-CDF draw gives its rows, are the same set.

    Without scores, every row's value is still U[0, 1) and independent of everything but its
    key (with them, of everything but its key and its score's rank), so a row
    drawn by inverse CDF from its key's distribution p has exactly the distribution of an
    independent draw; but the m rows of a key then hold floor(m p_k) or ceil(m p_k) rows of
    each cell k instead of a multinomial count whose SD is sqrt(m p_k (1 - p_k)). The
    synthetic table's marginals carry the model's shares, not the model's plus a sampling
    error (mbi's `synthetic_data` rounds counts for the same reason).

    Written here because numpy and scipy draw multinomially only; one sort of key + U (the
    integer key first, a random order within it) takes 4 ms per 100,000 rows here, against
    12 ms for `np.lexsort` of (U, key), and sampling 30,000 rows takes 0.20 s in all
    (`benchmarks/release.py`)."""
    n = len(keys)
    # by key (integers), then a random order within each, or the scores' order
    order = np.argsort(keys + rng.random(n)) if scores is None else np.lexsort((scores, keys))
    ordered = keys[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]]) if n else np.zeros(0, int)
    sizes = np.diff(np.r_[starts, n])
    group = np.repeat(np.arange(len(starts)), sizes)
    rank = np.arange(n) - starts[group]
    uniforms = np.empty(n)
    uniforms[order] = (rng.random(len(starts))[group] + rank) / sizes[group]
    return uniforms


def draw_rows(probabilities: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
    """One categorical draw per row of a (rows, cells) probability matrix by inverse CDF at
    the row's uniform."""
    cumulative = np.cumsum(probabilities, axis=1)
    u = uniforms[:, None] * cumulative[:, -1:]
    return np.minimum((cumulative < u).sum(axis=1), probabilities.shape[1] - 1)


def stratified_choice(shares: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """n cells drawn from one distribution over cells, stratified: cell k gets floor(n p_k)
    or ceil(n p_k) of them, in a random order."""
    probabilities = np.broadcast_to(shares, (n, len(shares)))
    return draw_rows(probabilities, systematic_uniforms(np.zeros(n, dtype=np.int64), rng))
