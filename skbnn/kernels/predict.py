"""Numba kernels for predictive summaries that numpy cannot vectorize cheaply."""

import math

import numpy as np
from numba.core import types

from ._compile import njit, wait_for_helpers

_SQRT2 = math.sqrt(2.0)

_MATRIX = types.Array(types.float64, 2, "C")
_VECTOR = types.Array(types.float64, 1, "C")

#: The argument types ``predict_interval`` calls :func:`mixture_quantiles` with (C arrays).
MIXTURE_QUANTILES_ARGS = (_MATRIX, _MATRIX, _VECTOR, _VECTOR, _MATRIX)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _mixture_cdf(x, mu, sd, w):
    c = 0.0
    for s in range(mu.shape[0]):
        c += w[s] * 0.5 * math.erfc(-(x - mu[s]) / (sd[s] * _SQRT2))
    return c


def mixture_quantiles(mu, sd, w, probs, out) -> None:
    """Quantiles of Gaussian mixtures by bisection on the mixture CDF
    (:func:`mixture_quantiles_kernel`).

    Serial and GIL-free; callers split the points over threads. A first call right after a
    cold fit may wait for the fit's helper process, which compiles the kernel into the
    cache (:func:`skbnn.kernels._compile.compile_aside`).

    Parameters
    ----------
    mu : ndarray of shape (n_points, n_draws)
        Component means per point.
    sd : ndarray of shape (n_points, n_draws) or (1, n_draws)
        Component standard deviations per point, or one row shared by all points; all > 0.
    w : ndarray of shape (n_draws,)
        Component weights summing to one.
    probs : ndarray of shape (n_probs,)
        Probabilities in (0, 1).
    out : ndarray of shape (n_points, n_probs)
    """
    wait_for_helpers(mixture_quantiles_kernel)
    mixture_quantiles_kernel(mu, sd, w, probs, out)


@njit(cache=True, nogil=True, error_model="numpy")
def mixture_quantiles_kernel(mu, sd, w, probs, out):
    """:func:`mixture_quantiles`'s kernel, with the same parameters."""
    n_points = mu.shape[0]
    shared = sd.shape[0] == 1
    for i in range(n_points):
        sd_i = sd[0] if shared else sd[i]
        row = mu[i]
        # plain loops: numpy's min and max would compile a kernel each
        sd_max = sd_i[0]
        row_min = row[0]
        row_max = row[0]
        finite = 0.0  # stays 0 unless a mean or sd is NaN or infinite
        for s in range(row.shape[0]):
            sd_max = max(sd_max, sd_i[s])
            row_min = min(row_min, row[s])
            row_max = max(row_max, row[s])
            finite += 0.0 * row[s] + 0.0 * sd_i[s]
        if finite != 0.0:
            for j in range(probs.shape[0]):
                out[i, j] = np.nan  # as numpy's min and max would propagate it
            continue
        lo0 = row_min - 40.0 * sd_max
        hi0 = row_max + 40.0 * sd_max
        for j in range(probs.shape[0]):
            lo = lo0
            hi = hi0
            # 100 halvings reach the float64 resolution of any bracket we can form
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                if mid == lo or mid == hi:
                    break
                if _mixture_cdf(mid, row, sd_i, w) < probs[j]:
                    lo = mid
                else:
                    hi = mid
            out[i, j] = 0.5 * (lo + hi)


@njit(cache=True, nogil=True, error_model="numpy")
def mixture_spread(mu, var, w, out):
    """``E|X - X'|`` for two independent draws of each point's Gaussian mixture:
    ``sum_ij w_i w_j E|N(mu_i - mu_j, var_i + var_j)|``, over the pairs ``i < j`` twice
    and the diagonal once (the sum is symmetric), in one pass without temporaries.

    Parameters
    ----------
    mu, var : ndarrays of shape (n_points, n_components)
        The components' means and variances (> 0) per point.
    w : ndarray of shape (n_points, n_components) or (1, n_components)
        The components' weights per point, or one row shared by all points.
    out : ndarray of shape (n_points,)
    """
    shared = w.shape[0] == 1
    sqrt_2_over_pi = math.sqrt(2.0 / math.pi)
    for p in range(mu.shape[0]):
        w_p = w[0] if shared else w[p]
        m = mu[p]
        v = var[p]
        total = 0.0
        for i in range(m.shape[0]):
            if w_p[i] == 0.0:
                continue
            # the diagonal's half, w_i E|N(0, 2 v_i)| / 2, as the pairs count twice
            pairs = w_p[i] * math.sqrt(v[i] / math.pi)
            for j in range(i + 1, m.shape[0]):
                s = math.sqrt(v[i] + v[j])
                d = m[i] - m[j]
                z = d / s
                # E|N(d, s^2)| = d (2 Phi(z) - 1) + 2 s phi(z)
                pairs += w_p[j] * (
                    d * math.erf(z / _SQRT2) + s * sqrt_2_over_pi * math.exp(-0.5 * z * z)
                )
            total += 2.0 * w_p[i] * pairs
        out[p] = total
