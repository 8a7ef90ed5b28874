"""The generator's one-way margins, held by the calibration weights.

A generator spends most of the budget on the one-way margins of every column, over the
public cells of `generators.domain.public_cells` (its `bins`). The weights must never move
them: weighted one-way shares equal the unweighted synthetic shares (the generator's DP
estimate), whatever else the weights correct. Two mechanisms, both post-processing of public
synthetic rows and DP weights:

- in the tilt: the indicators of every column's occupied cells but one (the reference, its
  most populated cell) are features whose targets are their unweighted synthetic shares,
  with no ridge (equality constraints of the max-entropy dual);
- after any tempering or smoothing: raking of the weights back to those shares (the
  I-projection that iterative proportional fitting, Deming and Stephan 1940, converges to;
  solved here by damped Newton steps on its dual, `HeldMargins.rake`). Raking multiplies each
  row's weight by one factor per column (its cell's), so the log weights stay a sum of
  per-cell terms and a certified bound on them grows by at most the sum over columns of the
  largest log factor.

Tempering alone can move a share by several points (a target's share of 41.5 % to 37.1 %);
raking after tempering keeps it at its synthetic value
(docs/decisions/0017-calibration-weights.md).
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from dprelease.generators.domain import cell_index, public_cells

# Damped Newton steps at most: 4-17 on NMES1988 and diamonds; up to a few hundred for
# weights concentrated on a few rows (log weights spanning 23,000 nats: 1.4 s).
RAKING_ITERATIONS = 300
MAX_DAMPING = 1e30
RAKING_TOLERANCE = 5e-7  # L2 norm of the weighted - unweighted kept shares after raking
HELD_TOLERANCE = 1e-6  # the check `max_shift` must pass on released weights


class HeldMargins:
    """The public one-way cells of every column and the synthetic rows' cells in them."""

    def __init__(self, encoder: Any, bins: int, synthetic: np.ndarray) -> None:
        self.bins = bins
        self.cells = [public_cells(column, bins) for column in encoder.columns]
        self.index = np.stack(
            [cell_index(c, synthetic).astype(np.int32) for c in self.cells], axis=1
        )
        n = synthetic.shape[0]
        self.shares = [
            np.bincount(self.index[:, j], minlength=c.size) / n for j, c in enumerate(self.cells)
        ]
        kept = [np.flatnonzero(s > 0) for s in self.shares]
        # every occupied cell but the most populated one (the reference) is a feature
        self.kept = [k[k != np.argmax(s)] for k, s in zip(kept, self.shares, strict=True)]
        self.offsets = np.cumsum([0] + [k.size for k in self.kept])
        self.size = int(self.offsets[-1])
        # each row's kept cell per column, as a position in that column's kept cells, or
        # kept.size for its reference or an unkept cell (int32: 4 bytes per row and column)
        self.local: np.ndarray = np.empty(self.index.shape, dtype=np.int32)
        for j, kept in enumerate(self.kept):
            position = np.full(self.cells[j].size, kept.size, dtype=np.int32)
            position[kept] = np.arange(kept.size, dtype=np.int32)
            self.local[:, j] = position[self.index[:, j]]

    def matrix(self, rows: np.ndarray | None = None) -> sparse.csr_array:
        """Indicators M of the kept cells for the synthetic rows `rows` (all by default):
        row i has a one in column offsets[j] + k when column j's cell of row i is its k-th
        kept cell. Built straight as CSR (each row's hits in column order, int32 indices)."""
        local = self.local if rows is None else self.local[rows]
        sizes = np.array([kept.size for kept in self.kept], dtype=np.int32)
        hit = local < sizes
        indices = (local + self.offsets[:-1].astype(np.int32))[hit]  # row-major
        indptr = np.concatenate([[0], np.cumsum(hit.sum(axis=1))])
        data = np.ones(indices.size)
        return sparse.csr_array((data, indices, indptr), shape=(local.shape[0], self.size))

    def apply(self, u: np.ndarray) -> np.ndarray:
        """M u for all rows (`matrix`), gathered column by column without forming M: on 1M
        synthetic rows M and its Hessian products would hold about 900 MB at each raking
        step (docs/decisions/0030-scale-and-latency.md)."""
        out = np.zeros(self.local.shape[0])
        for j, block in enumerate(np.split(np.asarray(u, dtype=float), self.offsets[1:-1])):
            out += np.append(block, 0.0)[self.local[:, j]]
        return out

    def column_sums(self, p: np.ndarray) -> np.ndarray:
        """M^T p: the kept cells' sums of p."""
        return np.concatenate(
            [
                np.bincount(self.local[:, j], weights=p, minlength=kept.size + 1)[: kept.size]
                for j, kept in enumerate(self.kept)
            ]
        )

    def gram(self, p: np.ndarray, sums: np.ndarray | None = None) -> np.ndarray:
        """M^T diag(p) M: block (j, k) is the p-weighted two-way table of columns j and k over
        their kept cells (one bincount per pair), the diagonal blocks diagonal with M^T p
        (`sums`, when the caller has it)."""
        out = np.zeros((self.size, self.size))
        out[np.diag_indices(self.size)] = self.column_sums(p) if sums is None else sums
        for j, k in combinations(range(len(self.kept)), 2):
            rows, columns = self.kept[j].size, self.kept[k].size
            if not rows or not columns:
                continue
            pair = self.local[:, j].astype(np.int64) * (columns + 1) + self.local[:, k]
            table = np.bincount(pair, weights=p, minlength=(rows + 1) * (columns + 1))
            block = table.reshape(rows + 1, columns + 1)[:rows, :columns]
            a, b = self.offsets[j], self.offsets[k]
            out[a : a + rows, b : b + columns] = block
            out[b : b + columns, a : a + rows] = block.T
        return out

    def log_bound(self, b: np.ndarray) -> float:
        """max over rows of b^T (held indicators): per column its largest coefficient or 0
        (the reference cell)."""
        bounds = np.split(np.asarray(b, dtype=float), self.offsets[1:-1])
        return float(sum(max(0.0, float(block.max(initial=0.0))) for block in bounds))

    def log_share(self, log_weights: np.ndarray, j: int) -> np.ndarray:
        """log of column j's weighted cell shares, summed per cell from its largest log
        weight (exact where exp would underflow: heavy-tailed weights); -inf when empty."""
        index, size = self.index[:, j], self.cells[j].size
        top = np.full(size, -np.inf)
        np.maximum.at(top, index, log_weights)
        base = np.where(np.isfinite(top), top, 0.0)
        sums = np.bincount(index, weights=np.exp(log_weights - base[index]), minlength=size)
        with np.errstate(divide="ignore"):
            return base + np.log(sums) - logsumexp(log_weights)

    def weighted_shares(self, log_weights: np.ndarray) -> list[np.ndarray]:
        return [np.exp(self.log_share(log_weights, j)) for j in range(len(self.cells))]

    def max_shift(self, log_weights: np.ndarray) -> float:
        """The largest |weighted - unweighted| one-way share over every column and cell: the
        check that the weights held the measured one-way margins (at most `HELD_TOLERANCE`
        for released calibration weights)."""
        shares = self.weighted_shares(log_weights)
        return float(max(np.abs(w - u).max() for w, u in zip(shares, self.shares, strict=True)))

    def rake(self, log_weights: np.ndarray) -> tuple[np.ndarray, float]:
        """Rake the weights to the unweighted one-way shares (module docstring). Returns the
        raked log weights and the sum over columns of the largest log factor applied (what a
        certified bound on the log weights grows by).

        Raking is the I-projection of w0 onto the weights with these one-way shares: w = w0
        exp(M u), M the indicators of the kept cells (the reference cells' factor is 1), u
        minimising the convex dual f(u) = log sum_i w0_i exp((M u)_i) - s^T u (s the kept
        cells' shares), whose gradient M^T p - s is the shift of the shares and whose
        Hessian is M^T diag(p) M - (M^T p)(M^T p)^T, p = w / sum w. Solved by damped
        Newton steps -(H + mu I)^{-1} g (Levenberg-Marquardt: mu shrinks after a step that
        lowers the dual and grows tenfold until one does, so the method is Newton's near the
        optimum and gradient descent where H is singular or nearly zero) to an L2 shift of
        at most `RAKING_TOLERANCE`. Hand-written: iterative proportional fitting (Deming and
        Stephan 1940) converges linearly at a rate set by the dependence between columns,
        and on rows drawn from a graphical model does not converge in 100 sweeps (19
        columns: 9 s of a 10 s release, shares still 0.064 off); scipy's `trust-exact` on
        the same dual raises on a NaN step for weights spanning 23,000 nats, and undamped
        Newton with a line search stalls on weights concentrated on a few rows
        (docs/decisions/0019-tilt-solver.md).
        """
        base = np.asarray(log_weights, dtype=float)
        if not np.all(np.isfinite(base)):
            raise ValueError("raking needs finite log weights")
        targets = np.concatenate(
            [share[kept] for share, kept in zip(self.shares, self.kept, strict=True)]
        )

        def dual(u: np.ndarray) -> tuple[float, np.ndarray]:
            logits = base + self.apply(u)
            total = float(logsumexp(logits))
            return total - float(targets @ u), np.exp(logits - total)

        u = np.zeros(self.size)
        value, p = dual(u)
        damping = None
        for _ in range(RAKING_ITERATIONS):
            shares = self.column_sums(p)
            gradient = shares - targets
            if np.linalg.norm(gradient) <= RAKING_TOLERANCE:
                break
            values, vectors = np.linalg.eigh(self.gram(p, shares) - np.outer(shares, shares))
            values = np.maximum(values, 0.0)  # positive semi-definite up to rounding
            if damping is None:
                damping = 1e-6 * max(float(values.max()), 1e-300)
            rotated = vectors.T @ gradient
            while damping < MAX_DAMPING:
                step = -vectors @ (rotated / (values + damping))
                candidate, q = dual(u + step)
                if candidate < value:
                    u, value, p = u + step, candidate, q
                    damping /= 10.0
                    break
                damping *= 10.0
            else:
                break  # no step lowers the dual: as close as floating point allows
        factors = np.split(u, self.offsets[1:-1])
        growth = sum(max(0.0, float(f.max(initial=0.0))) for f in factors)
        return base + self.apply(u), growth


def held_shift(
    log_weights: np.ndarray, encoder: Any, synthetic: np.ndarray, held: dict | None
) -> float | None:
    """The check on released weights: the largest shift of a measured one-way share
    (`HeldMargins.max_shift`; None when the weights hold no margins). Above
    `HELD_TOLERANCE` only for weights too heavy-tailed for raking to converge, which the
    PSIS gate refuses (unless the curator publishes unreliable weights)."""
    if not held or not held.get("held"):
        return None
    return HeldMargins(encoder, held["bins"], synthetic).max_shift(log_weights)
