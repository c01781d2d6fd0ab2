"""Small linear algebra for the sampler kernels: vector copies, sums and dot products, an
in-place Cholesky factorization, and products with the metric.

The metric (inverse mass matrix) of a chain is a :data:`Metric` named tuple ``(inv_m, sigma,
chol)`` of one of three kinds, which the kernels take as an integer beside it:

* :data:`DIAGONAL`: ``inv_m`` alone (``sigma`` and ``chol`` are ``(1, 1)`` placeholders, so
  every kind shares one compiled kernel);
* :data:`DENSE`: the matrix ``sigma`` with its lower Cholesky factor ``chol``, and its
  diagonal ``inv_m``. Velocities ``sigma @ p`` ("sharp" momenta) cost O(d^2);
* :data:`LOW_RANK`: ``Sigma = S (I + U diag(lam - 1) U^T) S`` with ``inv_m = diag(S)^2``,
  the orthonormal ``U``'s ``k`` columns as the rows of ``sigma`` (``(k, d)``) and ``chol``
  the ``(3, k)`` factors ``lam - 1``, ``lam^-1/2 - 1`` and ``lam^1/2 - 1``. Velocities
  cost O(d k).

Everything here is written as plain loops: the vectors are short and slice assignment or a
LAPACK call would cost more in compilation than it saves at run time.
"""

import math
from collections import namedtuple

from ._compile import njit

Metric = namedtuple("Metric", ["inv_m", "sigma", "chol"])

#: The kinds of :data:`Metric`
DIAGONAL, DENSE, LOW_RANK = 0, 1, 2

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


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def low_rank_update(basis, factor, y):
    """``y += U diag(factor) U^T y`` in place, for the orthonormal ``U`` whose columns are
    the rows of ``basis``.

    The columns are applied one after another: each is orthogonal to the others, so one
    column's update leaves the others' projections of ``y`` unchanged and no scratch
    vector is needed.
    """
    d = y.shape[0]
    for j in range(basis.shape[0]):
        u = basis[j]
        t = 0.0
        for i in range(d):
            t += u[i] * y[i]
        t *= factor[j]
        for i in range(d):
            y[i] += t * u[i]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def velocity(p, metric, kind, out):
    """``out = M^-1 p``: the velocity of momentum ``p`` under the metric of ``kind``."""
    d = p.shape[0]
    if kind == DENSE:
        sigma = metric.sigma
        for i in range(d):
            row = sigma[i]
            acc = 0.0
            for j in range(d):
                acc += row[j] * p[j]
            out[i] = acc
    elif kind == LOW_RANK:
        inv_m = metric.inv_m
        for i in range(d):
            out[i] = math.sqrt(inv_m[i]) * p[i]
        low_rank_update(metric.sigma, metric.chol[0], out)
        for i in range(d):
            out[i] *= math.sqrt(inv_m[i])
    else:
        inv_m = metric.inv_m
        for i in range(d):
            out[i] = inv_m[i] * p[i]
