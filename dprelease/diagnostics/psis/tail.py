"""PSIS step 2: the tail of each weight vector, found by partial selection.

Per row, the cutoff ``u`` (the (M+1)-th largest log weight) and the indices of the ``M``
largest, in O(S) with ``np.argpartition``. Long vectors are first pre-filtered: only the
entries at or above a lower bound for ``u`` read off a strided subsample are selected among
(verified: at least ``M + 1`` entries must pass, otherwise the whole vector is used). Ties
are resolved exactly as loo's stable ascending sort resolves them: among values equal to
``u`` the entries with the largest indices are in the tail. The algorithm and its references
are in psis.py's module docstring.
"""

from __future__ import annotations

import math

import numpy as np

# Vectors with at least this many draws are pre-filtered through a strided subsample of
# (at least) _PREFILTER_SAMPLE entries before the partial selection.
_PREFILTER_MIN_DRAWS = 1 << 16
_PREFILTER_SAMPLE = 1 << 14


def select_tail(lw: np.ndarray, m_tail: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the cutoff (the (M+1)-th largest value) and the indices of the M tail entries
    (unordered), with ties at the cutoff resolved as loo's stable sort resolves them."""
    n_rows, n_draws = lw.shape
    if n_draws >= _PREFILTER_MIN_DRAWS:
        cutoff = np.empty(n_rows)
        tail_idx = np.empty((n_rows, m_tail), dtype=np.intp)
        for r in range(n_rows):
            cutoff[r], tail_idx[r] = _select_tail_prefiltered(lw[r], m_tail)
    else:
        order = np.argpartition(lw, n_draws - m_tail - 1, axis=1)
        cutoff = lw[np.arange(n_rows), order[:, n_draws - m_tail - 1]]
        tail_idx = np.ascontiguousarray(order[:, n_draws - m_tail :])
    tied_rows = np.flatnonzero(lw[np.arange(n_rows)[:, None], tail_idx].min(axis=1) == cutoff)
    for r in tied_rows.tolist():
        # Values equal to the cutoff straddle it: keep every entry above it plus the tied
        # entries with the largest indices (the last ones in a stable ascending sort).
        above = np.flatnonzero(lw[r] > cutoff[r])
        tied = np.flatnonzero(lw[r] == cutoff[r])
        tail_idx[r] = np.concatenate((above, tied[tied.size - (m_tail - above.size) :]))
    return cutoff, tail_idx


def _select_tail_prefiltered(row: np.ndarray, m_tail: int) -> tuple[float, np.ndarray]:
    """Cutoff and tail indices of one long vector, selecting among the entries at or above a
    lower bound for the cutoff taken from a strided subsample.

    If at least ``M + 1`` entries reach the bound, the cutoff is >= the bound, so every entry
    >= the cutoff (tail, cutoff and all ties) is a candidate and the selection is exact.
    Otherwise (e.g. a periodic input aligned with the stride) the whole row is used.
    """
    sample = row[:: row.size // _PREFILTER_SAMPLE]
    expected = sample.size * (m_tail + 1) / row.size  # sampled entries at or above the cutoff
    rank = min(sample.size, math.ceil(2.0 * expected + 4.0 * math.sqrt(expected) + 8.0))
    bound = np.partition(sample, sample.size - rank)[sample.size - rank]
    candidates = np.flatnonzero(row >= bound)
    if candidates.size <= m_tail:
        order = np.argpartition(row, row.size - m_tail - 1)
        return float(row[order[row.size - m_tail - 1]]), order[row.size - m_tail :]
    values = row[candidates]
    order = np.argpartition(values, candidates.size - m_tail - 1)
    return float(values[order[candidates.size - m_tail - 1]]), candidates[
        order[candidates.size - m_tail :]
    ]
