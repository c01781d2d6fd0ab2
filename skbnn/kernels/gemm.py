"""Wide layers through BLAS: the forward product, the weight gradient and the delta of the
layer below, each one call of BLAS's matrix product ``dgemm``.

The hand-written passes of :mod:`.layers` and :mod:`.backprop` stream every row of the
feature-major arrays once per two outputs (or four inputs), so on a layer of many inputs and
outputs they are bound by memory traffic, where a blocked matrix product reuses each loaded
value from cache many times. On a layer of a few inputs or outputs (the first layer of most
tabular networks, a regression head) the passes are as fast, so a layer takes this path only
when both of its widths reach :data:`BLAS_MIN_WIDTH`. The choice depends on the layer's shape
alone, never on the number of rows, so a row's result does not change with how the rows are
split into blocks or threads.

:func:`gemm` calls the ``dgemm`` of scipy's BLAS through numba's own wrapper of it (the one
``np.dot`` uses), on the flat arrays the kernels hold, at an offset: one external call where
``np.dot`` on reshaped views would compile its shape checks and layout cases into every
network kernel (a quarter more compile time, measured). BLAS's matrices are column-major, so
a feature-major block of ``r`` features by ``n`` rows is, to it, ``n x r`` with leading
dimension ``n``.
"""

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

from ._compile import _FM, DISABLED, njit
from .team import GEMM, SPLIT_MIN_WEIGHTS, address, as_bits, collect, from_bits, post

#: The narrowest layer (fewest inputs or outputs) the matrix products serve.
BLAS_MIN_WIDTH = 16


@intrinsic
def _xxgemm(typingcontext, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    # numba_xxgemm: numba's wrapper of scipy's cython dgemm, which np.dot calls; a, b and c
    # are addresses (int64)
    sig = types.void(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)

    def codegen(context, builder, signature, args):
        from numba.np.linalg import ensure_blas

        ensure_blas()
        char = ir.IntType(8)
        void_p = char.as_pointer()
        intp = cgutils.intp_t
        fnty = ir.FunctionType(
            ir.IntType(32),
            [char, char, char, intp, intp, intp, void_p, void_p, intp, void_p, intp, void_p,
             void_p, intp],
        )  # fmt: skip
        fn = cgutils.get_or_insert_function(builder.module, fnty, "numba_xxgemm")
        sig_args = signature.args
        ta, tb, m_, n_, k_, al, A, la, B, lb, be, C, lc = args

        def cast(value, ty):
            return context.cast(builder, value, ty, types.intp)

        def flag(value, ty):
            yes = ir.Constant(char, ord("t"))
            no = ir.Constant(char, ord("n"))
            return builder.select(cgutils.is_not_null(builder, cast(value, ty)), yes, no)

        def pointer(value, ty):
            return builder.inttoptr(cast(value, ty), void_p)

        def slot(value, ty):
            value = context.cast(builder, value, ty, types.float64)
            return builder.bitcast(cgutils.alloca_once_value(builder, value), void_p)

        builder.call(
            fn,
            (ir.Constant(char, ord("d")), flag(ta, sig_args[0]), flag(tb, sig_args[1]),
             cast(m_, sig_args[2]), cast(n_, sig_args[3]), cast(k_, sig_args[4]),
             slot(al, sig_args[5]), pointer(A, sig_args[6]), cast(la, sig_args[7]),
             pointer(B, sig_args[8]), cast(lb, sig_args[9]), slot(be, sig_args[10]),
             pointer(C, sig_args[11]), cast(lc, sig_args[12])),
        )  # fmt: skip
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def gemm(trans_a, trans_b, m, n, k, alpha, A, a0, lda, B, b0, ldb, beta, C, c0, ldc, weights):
    """BLAS's ``C = alpha op(A) op(B) + beta C`` on column-major ``m x k``, ``k x n`` and
    ``m x n`` matrices that start at ``A[a0]``, ``B[b0]`` and ``C[c0]`` with leading
    dimensions ``lda``, ``ldb`` and ``ldc``; ``op`` transposes where ``trans_*`` is 1. The
    caller keeps every index inside the arrays.

    ``n`` is never the rows' dimension, and ``weights`` is the layer's number of weights:
    a layer of :data:`~skbnn.kernels.team.SPLIT_MIN_WEIGHTS` or more computes its product
    as two, over the first and the last columns of ``C``, the second on the team's helper
    where one runs (:mod:`skbnn.kernels.team`)."""
    a = address(A, a0)
    b = address(B, b0)
    c = address(C, c0)
    if weights < SPLIT_MIN_WEIGHTS or n < 2 * BLAS_MIN_WIDTH:
        _xxgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
        return
    # the first h columns here, the rest on the helper: h a multiple of 8, BLAS's widest
    # register block of doubles, so that neither half runs a ragged edge it need not
    h = (n // 2 + 7) // 8 * 8
    b2 = b + 8 * h * (1 if trans_b else ldb)
    c2 = c + 8 * h * ldc
    helped = post(GEMM, trans_a, trans_b, m, n - h, k, as_bits(alpha), a, lda, b2, ldb,
                  as_bits(beta), c2, ldc)  # fmt: skip
    _xxgemm(trans_a, trans_b, m, h, k, alpha, a, lda, b, ldb, beta, c, ldc)
    if helped:
        collect()
    else:
        _xxgemm(trans_a, trans_b, m, n - h, k, alpha, a, lda, b2, ldb, beta, c2, ldc)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def gemm_task(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
    """A posted product (:data:`~skbnn.kernels.team.GEMM`): ``alpha`` and ``beta`` as
    bits."""
    _xxgemm(trans_a, trans_b, m, n, k, from_bits(alpha), a, lda, b, ldb, from_bits(beta), c,
            ldc)  # fmt: skip


if DISABLED:

    def _view(x, offset, rows, cols, ld):
        # the column-major rows x cols matrix at x[offset:] with leading dimension ld
        return np.lib.stride_tricks.as_strided(x[offset:], shape=(rows, cols), strides=(8, 8 * ld))

    def gemm(
        trans_a,
        trans_b,
        m,
        n,
        k,
        alpha,
        A,
        a0,
        lda,
        B,
        b0,
        ldb,
        beta,
        C,
        c0,
        ldc,  # noqa: F811
        weights=0,
    ):
        opa = _view(A, a0, k if trans_a else m, m if trans_a else k, lda)
        opb = _view(B, b0, n if trans_b else k, k if trans_b else n, ldb)
        opa = opa.T if trans_a else opa
        opb = opb.T if trans_b else opb
        out = _view(C, c0, m, n, ldc)
        out[...] = alpha * (opa @ opb) + (beta * out if beta != 0.0 else 0.0)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def wide(n_in, n_out):
    """Whether a layer of ``n_in`` inputs and ``n_out`` outputs takes the BLAS path."""
    return n_in >= BLAS_MIN_WIDTH and n_out >= BLAS_MIN_WIDTH


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def dense_blas(src, src_base, n_in, theta, w_start, b_start, dst, dst_base, n_out, n):
    """``dst[j, :] = b[j] + sum_i W[i, j] src[i, :]``: the biases, then one product."""
    for j in range(n_out):
        b = theta[b_start + j]
        z = dst[dst_base + j * n : dst_base + (j + 1) * n]
        for t in range(n):
            z[t] = b
    # Z^T (n x n_out) += X^T (n x n_in) W (n_in x n_out); W is row-major, so transposed
    gemm(0, 1, n, n_out, n_in, 1.0, src, src_base, n, theta, w_start, n_out, 1.0, dst,
         dst_base, n, n_in * n_out)  # fmt: skip


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def wgrad_blas(src, n_in, delta, n_out, n, grad, w_start, b_start, beta):
    """``grad[W] += beta src delta^T`` in one product, and the biases' sums."""
    # W's gradient, row-major n_in x n_out, is column-major n_out x n_in: delta src^T
    gemm(
        1, 0, n_out, n_in, n, beta, delta, 0, n, src, 0, n, 1.0, grad, w_start, n_out, n_in * n_out
    )
    for j in range(n_out):
        d = delta[j * n : (j + 1) * n]
        s = 0.0
        for t in range(n):
            s += d[t]
        grad[b_start + j] += beta * s


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def delta_blas(theta, ws, delta, nxt, in_base, n_in, n_out, w_start, n, c0, c1, c2, z):
    """The delta of the layer below into ``ws[nxt:]``: ``W delta`` in one product, times the
    activation's derivative ``(c0 + a (c1 + c2 a)) (1 if a > 0 else z)`` at the activations
    ``a`` in ``ws[in_base:]`` (see :func:`skbnn.kernels.backprop._delta_below`)."""
    # ND^T (n x n_in) = delta^T (n x n_out) W^T (n_out x n_in), W^T column-major as stored
    gemm(
        0, 0, n, n_in, n_out, 1.0, delta, 0, n, theta, w_start, n_out, 0.0, ws, nxt, n, n_in * n_out
    )
    nd = ws[nxt : nxt + n_in * n]
    a = ws[in_base : in_base + n_in * n]
    for t in range(n_in * n):
        at = a[t]
        nd[t] *= (c0 + at * (c1 + c2 * at)) * (1.0 if at > 0.0 else z)
