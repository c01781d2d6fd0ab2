"""The symmetric copies of a network's mode, which Laplace's evidence counts."""

from __future__ import annotations

import math

import numpy as np


def log_symmetric_modes(layout, theta, variance, activation: str) -> float:
    """The log number of distinct modes that the network's symmetries map ``theta`` to.

    Permuting the units of a hidden layer (with their incoming weights, bias and outgoing
    weights) leaves the likelihood and an exchangeable prior unchanged, and so does flipping
    the sign of a tanh unit's incoming weights, bias and outgoing weights. A mode therefore
    has up to ``prod_l h_l!`` copies (times ``2^h_l`` for tanh) of equal mass, which the
    marginal likelihood counts and a Gaussian at one mode does not (MacKay 1992; Bishop
    2006, section 5.7). Units whose parameters coincide within the posterior's spread (dead
    ReLU units pulled to zero by the prior, units that collapsed into one) make fewer
    distinct copies: the count is the orbit's size, ``h! / prod_c m_c!`` for classes of
    ``m_c`` coinciding units (and for tanh ``2^h`` over ``2^m_0`` for the ``m_0`` units at
    zero, which a flip maps to themselves). Two copies coincide when the parameters that
    differ between them are less than one posterior standard deviation apart in the sum of
    squares, ``sum_i (delta_i / sd_i)^2 < 1``.

    Parameters
    ----------
    layout : skbnn.layout.NetworkLayout
    theta : ndarray of shape (n_params,)
        The mode.
    variance : ndarray of shape (n_weights,)
        Marginal posterior variances of the network parameters.
    activation : str
        The hidden activation: permutations for ``"relu"`` and ``"logistic"``, permutations
        and sign flips for ``"tanh"``; 0 for ``"identity"``, whose hidden layers have a
        continuous symmetry (a rotation of the units), where no count applies.

    Returns
    -------
    float
    """
    from scipy.sparse.csgraph import connected_components

    if activation == "identity":
        return 0.0
    total = 0.0
    sizes = layout.sizes
    for layer in range(layout.n_layers - 1):
        fan_in, h, fan_out = int(sizes[layer]), int(sizes[layer + 1]), int(sizes[layer + 2])
        w_in, b = layout.slices(layer)
        w_out, _ = layout.slices(layer + 1)
        # the parameters of unit j: column j of W_l, b_l[j], row j of W_{l+1}
        unit = np.hstack([
            np.arange(w_in.start, w_in.stop).reshape(fan_in, h).T,
            np.arange(b.start, b.stop)[:, None],
            np.arange(w_out.start, w_out.stop).reshape(h, fan_out),
        ])  # fmt: skip
        S, P = theta[unit], 1.0 / variance[unit]
        # the distance a swap of units i and j moves theta (and a swap with both flipped)
        swap = np.array([np.sum((S[i] - S) ** 2 * (P[i] + P), axis=1) for i in range(h)])
        same = swap < 1.0
        zero = np.zeros(h, dtype=bool)
        if activation == "tanh":
            zero = 4.0 * np.sum(S * S * P, axis=1) < 1.0
            flip = np.array([np.sum((S[i] + S) ** 2 * (P[i] + P), axis=1) for i in range(h)])
            same = (same | (flip < 1.0)) & ~zero[:, None] & ~zero[None, :]
        _, labels = connected_components(same, directed=False)
        counts = np.bincount(labels[~zero]) if np.any(~zero) else np.zeros(0, dtype=int)
        total += math.lgamma(h + 1) - sum(math.lgamma(m + 1) for m in counts)
        if activation == "tanh":
            m0 = int(np.sum(zero))
            total += (h - m0) * math.log(2.0) - math.lgamma(m0 + 1)
    return total
