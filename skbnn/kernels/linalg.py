"""Small linear algebra for the sampler kernels: vector copies, sums and dot products, an
in-place Cholesky factorization, and products with the metric.

The metric (inverse mass matrix) of a chain is a :data:`Metric` named tuple ``(inv_m, sigma,
chol)``: its diagonal ``inv_m``, and, when the metric is dense, the matrix ``sigma`` with its
lower Cholesky factor ``chol`` (``(1, 1)`` placeholders for a diagonal metric, so both kinds
share one compiled kernel). Velocities ``sigma @ p`` ("sharp" momenta) cost O(d^2) when dense,
which pays when the posterior is strongly correlated.

Everything here is written as plain loops: the vectors are short and slice assignment or a
LAPACK call would cost more in compilation than it saves at run time.
"""

import math
from collections import namedtuple

from ._compile import njit

Metric = namedtuple("Metric", ["inv_m", "sigma", "chol"])

# reassoc lets LLVM vectorize the reductions and contract fuses multiply-adds; neither
# assumes finite values, so a divergent trajectory still shows up as inf/NaN.
_FM = {"reassoc", "contract"}


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def copy(dst, src):
    """``dst[:] = src`` for vectors of equal length."""
    # an explicit loop: slice assignment would compile numpy's shape-mismatch error path,
    # which costs seconds of compilation per kernel and cannot happen here
    for i in range(dst.shape[0]):
        dst[i] = src[i]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def add(dst, src):
    """``dst += src`` for vectors of equal length."""
    for i in range(dst.shape[0]):
        dst[i] += src[i]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def dot(a, b):
    """The dot product of two vectors of equal length."""
    acc = 0.0
    for i in range(a.shape[0]):
        acc += a[i] * b[i]
    return acc


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def cholesky_inplace(a):
    """Overwrite the symmetric positive definite ``a`` with its lower Cholesky factor.

    The upper triangle is zeroed. ``a`` is small, so plain loops beat a LAPACK call's
    compile time.
    """
    m = a.shape[0]
    for j in range(m):
        acc = a[j, j]
        for p in range(j):
            acc -= a[j, p] * a[j, p]
        a[j, j] = math.sqrt(acc)
        for i in range(j + 1, m):
            acc = a[i, j]
            for p in range(j):
                acc -= a[i, p] * a[j, p]
            a[i, j] = acc / a[j, j]
        for i in range(j):
            a[i, j] = 0.0


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def velocity(p, metric, dense, out):
    """``out = M^-1 p``: the velocity of momentum ``p`` under the diagonal or dense metric."""
    d = p.shape[0]
    if dense:
        sigma = metric.sigma
        for i in range(d):
            row = sigma[i]
            acc = 0.0
            for j in range(d):
                acc += row[j] * p[j]
            out[i] = acc
    else:
        inv_m = metric.inv_m
        for i in range(d):
            out[i] = inv_m[i] * p[i]
