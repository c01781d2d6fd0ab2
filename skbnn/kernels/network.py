"""Numba kernels: MLP forward pass, log-likelihood, prior, and their gradients.

All arrays are flat and feature-major: ``XT`` is ``X.T`` raveled (``d * n``), so the innermost
loops run over rows with unit stride and vectorize. The kernels take the target as one
:data:`KernelTarget` named tuple (built by :meth:`skbnn.target.Target.kernel_target`)::

    KernelTarget(XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfg)

The number of rows is ``XT.shape[0] // sizes[0]``, so a target over a subset of rows is the
same tuple with other ``XT``, ``YT`` and ``W`` (the training engine's minibatches). ``YT`` is
the standardized target (Gaussian), the 0/1 label (Bernoulli) or a one-hot matrix
(categorical), feature-major like ``XT``. ``W`` holds a weight per row that multiplies the
row's log-likelihood (``sample_weight``; ones when none is given). Every count of rows in the
likelihood is the sum of ``W`` (:func:`weight_sum`), so an integer weight is exactly a
repeated row. ``prior_mean`` and ``prior_scale`` are per network parameter
(``prior_scale`` holds standard deviations for the Gaussian prior, scales for the logistic,
the first component's standard deviations for the scale mixture).
``tau`` holds the noise precisions per output used when the noise is not part of ``theta``.
``cfg`` is a one-element record array of dtype :data:`CONFIG`, read by field name:

==================  =====================================================================
``activation``      code from :data:`skbnn.network.ACTIVATIONS`
``likelihood``      code from :data:`skbnn.network.LIKELIHOODS`
``n_noise``         number of trailing log noise precisions in ``theta``
``noise_marginal``  1: the Gaussian noise precisions are integrated out against their
                    Gamma(a, b) prior (see :func:`logp_grad`) and ``tau`` is ignored
``prior``           0 Gaussian, 1 logistic, 2 scale mixture
``hierarchical``    1: each layer's weight precision is a Gamma(hyper_shape, hyper_rate)
                    variable updated by the method (``prior_scale`` holds its current value)
``noise_shape``     a of the Gamma(a, b) prior of each noise precision
``noise_rate``      b of that prior
``beta``            multiplies the log-likelihood: SMC's tempering, or ``n / batch`` for a
                    minibatch
``hyper_shape``     shape of a hierarchical prior's Gamma
``hyper_rate``      rate of a hierarchical prior's Gamma
``fan_in``          1.0 when a hierarchical prior scales weights by ``1 / sqrt(fan_in)``
``mix_weight``      the scale mixture's weight ``pi`` of its first component
``mix_ratio``       its second component's sd over its first's
==================  =====================================================================

The heteroscedastic Gaussian likelihood reads ``2 m`` network outputs for ``m`` targets: the
means, then raw variances mapped through ``softplus(f) + 1e-6`` (as in Lakshminarayanan et
al. 2017).

The workspace ``ws`` holds the activations of every layer followed by two delta buffers
(:func:`workspace_size`).
"""

import atexit
import functools
import math
import os
import pickle
import subprocess
import sys
import threading
from collections import namedtuple

import numba
import numba.experimental.function_type  # noqa: F401  (registers numba's typing of the addresses)
import numpy as np
from numba.core import types
from numba.core.types.function_type import WrapperAddressProtocol
from numba.core.typing.typeof import typeof_impl
from numba.extending import overload

from ._jit import CACHE, njit

KernelTarget = namedtuple(
    "KernelTarget",
    ["XT", "YT", "W", "sizes", "offsets", "prior_mean", "prior_scale", "tau", "cfg"],
)

#: A :data:`KernelTarget`'s fields and two more: ``target``, that :data:`KernelTarget` itself
#: (the same arrays), and ``density``, :func:`logp_grad` compiled for its types and called
#: through its address (:func:`density_target`). The samplers' and the training engine's
#: kernels take this one and evaluate the log density with :func:`density`.
DensityTarget = namedtuple("DensityTarget", KernelTarget._fields + ("target", "density"))

CONFIG = np.dtype(
    [
        ("activation", np.int64),
        ("likelihood", np.int64),
        ("n_noise", np.int64),
        ("noise_marginal", np.int64),
        ("prior", np.int64),
        ("hierarchical", np.int64),
        ("noise_shape", np.float64),
        ("noise_rate", np.float64),
        ("beta", np.float64),
        ("hyper_shape", np.float64),
        ("hyper_rate", np.float64),
        ("fan_in", np.float64),
        ("mix_weight", np.float64),
        ("mix_ratio", np.float64),
    ],
    align=True,
)

# floor of the heteroscedastic likelihood's variance, as in Lakshminarayanan et al. (2017)
HETERO_MIN_VAR = 1e-6

# reassoc lets LLVM vectorize the row reductions and contract fuses multiply-adds; neither
# assumes finite values, so a divergent trajectory still shows up as inf/NaN.
#
# Hot inner loops index per-row views (``x = src[i * n : (i + 1) * n]; x[t]``), never
# ``buf[base + t]``: numba wraps negative indices, and since LLVM cannot prove ``base + t``
# non-negative it turns such loops into gathers or leaves them scalar (several times slower).
_FM = {"reassoc", "contract"}


def _compiles_for_avx512() -> bool:
    """Whether numba compiles for a CPU with AVX-512 (the host's, or ``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES``): thirty-two vector registers, where AVX2 and SSE2 have sixteen."""
    from numba.core.registry import cpu_target

    features = cpu_target.target_context.codegen().magic_tuple()[2]
    return "+avx512f" in features.split(",")


# The weight gradient's four-by-four passes keep sixteen sums and eight loaded vectors in
# registers: twenty-four, which AVX-512's thirty-two hold, and AVX2's or SSE2's sixteen do
# not (the sums spill, and the passes run slower than by pairs; doc/performance.md). Only
# AVX-512 builds compile them (numba prunes a branch on this constant before typing it).
# numba's cache is keyed by the same CPU name and features, so a cached kernel always had
# this value.
_FOUR_BY_FOUR = _compiles_for_avx512()


# The activation, likelihood and prior codes select branches. A kernel compiled by
# logp_grad_for passes them as constants (literal types, see _jit.LITERAL_PARAMETERS), and
# the functions below that branch on one are overloaded on its type: for a literal code
# numba types and compiles that branch's body only, for a run-time code every branch, as
# one function. (numba's own dead-branch pruning does not read literal arguments.)
_OVERLOAD = {"prefer_literal": True, "jit_options": {"nogil": True, "error_model": "numpy",
                                                     "fastmath": _FM}}  # fmt: skip


def _code(arg) -> int | None:
    """The value of a literal code argument's type, None for a run-time code."""
    value = getattr(arg, "literal_value", None)
    return value if isinstance(value, int) else None


def _dispatch(arg, variants: dict, default):
    """An overload's implementation: ``variants[code]`` (or ``default``) for a literal code
    ``arg``, else None (the caller then returns its run-time branching)."""
    code = _code(arg)
    if code is None:
        return None
    return variants.get(code, default)


_LOG_2PI = math.log(2.0 * math.pi)

# The activation functions below are written in plain arithmetic because math.tanh and
# math.exp are opaque libm calls that keep the activation loops scalar. They must not be
# reassociated: the range reduction relies on the exact evaluation order.
_FM_EXACT = {"contract"}
_LOG2E = 1.4426950408889634
# ln 2 split so that k * _LN2_HI is exact for |k| < 2**20 (Cody-Waite, as in fdlibm)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
# Taylor coefficients 1/m! of expm1 on |r| <= ln2 / 2 (truncation error < 1e-17 relative)
_C2 = 1.0 / 2.0
_C3 = 1.0 / 6.0
_C4 = 1.0 / 24.0
_C5 = 1.0 / 120.0
_C6 = 1.0 / 720.0
_C7 = 1.0 / 5040.0
_C8 = 1.0 / 40320.0
_C9 = 1.0 / 362880.0
_C10 = 1.0 / 3628800.0
_C11 = 1.0 / 39916800.0
_C12 = 1.0 / 479001600.0
_C13 = 1.0 / 6227020800.0


# 1.5 * 2**52: adding it to |u| < 2**51 rounds u to the nearest integer k, which then sits in
# the low bits of the sum (float64 spacing is 1 there). This finds k without a float-to-int
# conversion: AVX2 has no vector one for int64, and math.floor's left the loops half scalar.
_ROUND_SHIFT = 6755399441055744.0
_ROUND_SHIFT_BITS = 0x4338000000000000


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _reduce_ln2(v):
    # k and r with v = k ln2 + r, |r| <= ln2 / 2 (k the integer nearest v / ln2); v must be
    # finite and above -2**50
    u = v * _LOG2E + _ROUND_SHIFT
    kf = u - _ROUND_SHIFT
    k = np.float64(u).view(np.int64) - _ROUND_SHIFT_BITS
    return k, (v - kf * _LN2_HI) - kf * _LN2_LO


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _expm1_reduced(v):
    # k and expm1(r) for v = k ln2 + r (_reduce_ln2)
    k, r = _reduce_ln2(v)
    # expm1(r) = r + r^2 q(r), q by Estrin's scheme: about 20 cycles of latency rather than
    # Horner's 50, which let too few elements overlap in the vectorized loops (2x slower)
    r2 = r * r
    r4 = r2 * r2
    q0 = (_C2 + _C3 * r) + (_C4 + _C5 * r) * r2
    q1 = (_C6 + _C7 * r) + (_C8 + _C9 * r) * r2
    q2 = (_C10 + _C11 * r) + (_C12 + _C13 * r) * r2
    q = (q0 + q1 * r4) + q2 * (r4 * r4)
    return k, r + r2 * q


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _pow2(k):
    # 2**k for integer -1022 <= k <= 1023, built from the exponent bits
    return np.int64((k + 1023) << 52).view(np.float64)


# exp(r) = (E(r^2) + r O(r^2)) / (E(r^2) - r O(r^2)) is the [6/6] Pade approximant of exp,
# whose numerator is sum_j (12 - j)! 6! / (12! j! (6 - j)!) r^j; on |r| <= ln2 / 2 it is off by
# at most 2e-19 relative. tanh and the logistic are ratios themselves, so with it they need
# one division and two short polynomials in r^2 instead of expm1's twelve terms.
_PE1 = 5.0 / 44.0
_PE2 = 1.0 / 792.0
_PE3 = 1.0 / 665280.0
_PO0 = 0.5
_PO1 = 1.0 / 66.0
_PO2 = 1.0 / 15840.0


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _exp_pade(v):
    # k, E and t = r O for v = k ln2 + r (_reduce_ln2), with e^v = 2^k (E + t) / (E - t),
    # E in [1, 1.014] and |t| < 0.18
    k, r = _reduce_ln2(v)
    z = r * r
    e = 1.0 + z * (_PE1 + z * (_PE2 + z * _PE3))
    t = r * (_PO0 + z * (_PO1 + z * _PO2))
    return k, e, t


@njit(cache=True, nogil=True, fastmath=_FM_EXACT, error_model="numpy", from_python=False)
def _tanh(x):
    # With e^(-2|x|) = s (E + t) / (E - t), s = 2^k (_exp_pade): tanh|x| = (1 - e) / (1 + e)
    # = (E (1 - s) - t (1 + s)) / (E (1 + s) - t (1 - s)), where 1 - s and 1 + s are exact;
    # at k = 0 the numerator is -2t, so small |x| keep their relative accuracy. Beyond
    # |x| = 1/2 it uses 1 - 2 s (E + t) / (the same denominator) instead, whose quotient is
    # at most 1/2, so its rounding is smaller in the result: the ratio's own would round
    # to 1 slightly before tanh does (measured: 1/2 is where the two errors cross). Both
    # dividends are computed and selected so the loop stays branch-free, with one
    # division. The clamp (tanh rounds to 1 long before) lets NaN through, and NaN then
    # runs through every step (the range reduction has no integer conversion) and comes
    # out as NaN without a select. Within 4 ulp (tests/test_kernels.py).
    v = -2.0 * abs(x)
    v = -44.0 if v < -44.0 else v
    k, e, t = _exp_pade(v)
    s = _pow2(k)
    a = 1.0 - s
    b = 1.0 + s
    den = e * b - t * a
    if v > -1.0:
        c = 0.0
        num = t * b - e * a
    else:
        c = 1.0
        num = (2.0 * s) * (e + t)
    # (A select returning x itself for NaN made LLVM store tanh(z[t]) over z[t] with a
    # masked store, microcoded and about 10x slower on AMD.)
    return math.copysign(c - num / den, x)


@njit(cache=True, nogil=True, fastmath=_FM_EXACT, error_model="numpy", from_python=False)
def _logistic(x):
    # With e^-|x| = s (E + t) / (E - t) (_exp_pade): 1 / (1 + e^-x) = (E - t) / (E - t +
    # s (E + t)) for x >= 0, and s (E + t) over the same below, so neither side overflows.
    # s is applied as two powers of 2 to reach the subnormal range, and below 0 the second
    # after dividing, so that a subnormal result is rounded once; below -750 it rounds to
    # 0. NaN passes the clamp and comes out as NaN, as in _tanh.
    v = -abs(x)
    v = -750.0 if v < -750.0 else v
    k, e, t = _exp_pade(v)
    h = k >> 1
    a = e - t
    b = (e + t) * _pow2(h)
    rest = _pow2(k - h)
    den = a + b * rest
    if x >= 0.0:
        num = a
        scale = 1.0
    else:
        num = b
        scale = rest
    return (num / den) * scale


# Series of 2 atanh(s) = log((1 + s) / (1 - s)) beyond its leading 2s: 2 / (2j + 1) for the
# term in s^(2j + 1). With |s| <= 0.2 the first omitted term is below 3e-20 of the result.
_A1 = 2.0 / 3.0
_A2 = 2.0 / 5.0
_A3 = 2.0 / 7.0
_A4 = 2.0 / 9.0
_A5 = 2.0 / 11.0
_A6 = 2.0 / 13.0
_A7 = 2.0 / 15.0
_A8 = 2.0 / 17.0
_A9 = 2.0 / 19.0
_A10 = 2.0 / 21.0
_A11 = 2.0 / 23.0
_A12 = 2.0 / 25.0
_SQRT_HALF_BITS = 0x3FE6A09E667F3BCD  # the float64 bit pattern of sqrt(1/2)
_TINY = 2.2250738585072014e-308  # smallest normal float64
_TWO54 = 18014398509481984.0


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _exp_neg(v):
    # e^v for v <= 0, where it cannot overflow; -inf gives 0 and NaN stays NaN. As in
    # _logistic, two powers of 2 reach the subnormal range with a single rounding there, and
    # the clamp (e^v rounds to 0 below -745.14) keeps NaN and -inf out of the integer
    # conversion.
    w = v if v > -750.0 else -750.0
    k, p = _expm1_reduced(w)
    h = k >> 1
    s = _pow2(h)
    e = (s * p + s) * _pow2(k - h)
    return e if v == v else v


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _log1p_corr(f):
    # c with log(1 + f) = f - c, for -0.3 <= f <= 0.5. log(1 + f) = 2 atanh(s) with
    # s = f / (2 + f), and 2s = f - f s, so c = s (f - series). f itself is exact and c is
    # at most a quarter of the result, which keeps the rounding of s below half an ulp of it.
    s = f / (2.0 + f)
    z = s * s
    q = _A9 + z * (_A10 + z * (_A11 + z * _A12))
    q = _A5 + z * (_A6 + z * (_A7 + z * (_A8 + z * q)))
    q = _A1 + z * (_A2 + z * (_A3 + z * (_A4 + z * q)))
    return s * (f - z * q)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _log(x):
    # Natural log from the bits, because math.log is an opaque libm call that keeps loops
    # scalar. x = 2^e m with sqrt(1/2) <= m < sqrt(2): subtracting the bits of sqrt(1/2)
    # makes mantissas above sqrt(2) carry into the exponent field, so the shift gives e
    # directly. m - 1 is exact (Sterbenz). Subnormals are scaled up by 2^54 first.
    sub = x < _TINY
    xs = x * _TWO54 if sub else x
    b = np.float64(xs).view(np.int64)
    e = (b - _SQRT_HALF_BITS) >> 52
    f = np.int64(b - (e << 52)).view(np.float64) - 1.0
    ef = np.float64(e - 54 if sub else e)
    r = ef * _LN2_HI + (f - (_log1p_corr(f) - ef * _LN2_LO))
    # +inf and NaN pass through, 0 gives -inf and negatives NaN
    r = r if x < np.inf else x
    return r if x > 0.0 else (-np.inf if x == 0.0 else np.nan)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _log1p_unit(e):
    # log(1 + e) for 0 <= e <= 1 (NaN stays NaN), to full relative accuracy even for tiny e,
    # where log(1.0 + e) would lose e. Above 1/2 it uses log(1 + e) = ln2 + log1p((e - 1) / 2),
    # whose argument is again exact.
    big = e >= 0.5
    f = 0.5 * (e - 1.0) if big else e
    j = 1.0 if big else 0.0
    return j * _LN2_HI + (f - (_log1p_corr(f) - j * _LN2_LO))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _logistic_logpdf(z):
    # log of the standard logistic density e^-z / (1 + e^-z)^2, symmetric in z, as
    # -|z| - 2 log1p(e^-|z|) so neither term overflows; NaN stays NaN, +-inf gives -inf
    a = abs(z)
    return -a - 2.0 * _log1p_unit(_exp_neg(-a))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _mixture_logpdf(d, s1, s2, log_w1, log_w2):
    """``log(w1 N(d | 0, s1^2) + w2 N(d | 0, s2^2)) + log(2 pi) / 2`` and its derivative in
    ``d``, by log-sum-exp: each component's weight in the derivative is its posterior
    responsibility. NaN stays NaN; +-inf gives -inf."""
    z1 = d / s1
    z2 = d / s2
    l1 = log_w1 - 0.5 * z1 * z1 - math.log(s1)
    l2 = log_w2 - 0.5 * z2 * z2 - math.log(s2)
    top = l1 if l1 > l2 else l2
    if not top > -math.inf:
        # both components underflow (|d| infinite), or NaN
        return top, -d / (max(s1, s2) ** 2)
    e1 = math.exp(l1 - top)
    e2 = math.exp(l2 - top)
    total = e1 + e2
    return top + math.log(total), -d * (e1 / (s1 * s1) + e2 / (s2 * s2)) / total


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _bernoulli_ll(f, y, e):
    # y f - softplus(f) with e = e^-|f|, softplus(f) = max(f, 0) + log1p(e). Subtracting
    # max(f, 0) first cancels exactly against y f for a confidently right label (y = 1,
    # f > 0), leaving -log1p(e) to full relative accuracy. Non-finite f gives non-finite.
    return (y * f - (f if f >= 0.0 else 0.0)) - _log1p_unit(e)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM_EXACT, from_python=False)
def _bernoulli_delta(f, y, e):
    # y - sigmoid(f) with e = e^-|f|, as y q - (1 - y) p with p = sigmoid(f) and q = 1 - p
    # both computed directly (equal since p + q = 1), so it keeps its relative accuracy where
    # p rounds to 1 and y - p would cancel.
    inv = 1.0 / (1.0 + e)
    pos = f >= 0.0
    p = inv if pos else e * inv
    q = e * inv if pos else inv
    return y * q - (1.0 - y) * p


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _dense(src, src_base, n_in, theta, w_start, b_start, dst, dst_base, n_out, n):
    # dst[j, :] = b[j] + sum_i W[i, j] src[i, :]. Two outputs per pass over the rows. The
    # r = n_in % 4 inputs that do not fill a group of four come first, one per pass, the
    # first of them in the pass that writes the biases (with none, that pass adds input 0
    # at weight 0); then four inputs per pass: each loaded src value feeds two FMAs, each
    # dst row is read and written once per four inputs, and the eight weights stay in
    # registers. An odd last output goes alone, in the same passes. Each pass writes both
    # dst rows, and the stores, not the FMAs, bound the passes of one input: a pass of its
    # own for the biases cost as much as one more input.
    r = n_in % 4
    x = src[src_base : src_base + n]
    j = 0
    while j < n_out:
        two = j + 1 < n_out
        z0 = dst[dst_base + j * n : dst_base + (j + 1) * n]
        b0 = theta[b_start + j]
        v0 = theta[w_start + j] if r > 0 else 0.0
        if two:
            z1 = dst[dst_base + (j + 1) * n : dst_base + (j + 2) * n]
            b1 = theta[b_start + j + 1]
            u0 = theta[w_start + j + 1] if r > 0 else 0.0
            for t in range(n):
                a0 = x[t]
                z0[t] = b0 + v0 * a0
                z1[t] = b1 + u0 * a0
            for i in range(1, r):
                v0 = theta[w_start + i * n_out + j]
                u0 = theta[w_start + i * n_out + j + 1]
                x0 = src[src_base + i * n : src_base + (i + 1) * n]
                for t in range(n):
                    z0[t] += v0 * x0[t]
                    z1[t] += u0 * x0[t]
            i = r
            while i < n_in:
                g = w_start + i * n_out + j
                v0 = theta[g]
                u0 = theta[g + 1]
                v1 = theta[g + n_out]
                u1 = theta[g + n_out + 1]
                v2 = theta[g + 2 * n_out]
                u2 = theta[g + 2 * n_out + 1]
                v3 = theta[g + 3 * n_out]
                u3 = theta[g + 3 * n_out + 1]
                x0 = src[src_base + i * n : src_base + (i + 1) * n]
                x1 = src[src_base + (i + 1) * n : src_base + (i + 2) * n]
                x2 = src[src_base + (i + 2) * n : src_base + (i + 3) * n]
                x3 = src[src_base + (i + 3) * n : src_base + (i + 4) * n]
                for t in range(n):
                    a0 = x0[t]
                    a1 = x1[t]
                    a2 = x2[t]
                    a3 = x3[t]
                    z0[t] += v0 * a0 + v1 * a1 + v2 * a2 + v3 * a3
                    z1[t] += u0 * a0 + u1 * a1 + u2 * a2 + u3 * a3
                i += 4
            j += 2
        else:
            for t in range(n):
                z0[t] = b0 + v0 * x[t]
            for i in range(1, r):
                v0 = theta[w_start + i * n_out + j]
                x0 = src[src_base + i * n : src_base + (i + 1) * n]
                for t in range(n):
                    z0[t] += v0 * x0[t]
            i = r
            while i < n_in:
                v0 = theta[w_start + i * n_out + j]
                v1 = theta[w_start + (i + 1) * n_out + j]
                v2 = theta[w_start + (i + 2) * n_out + j]
                v3 = theta[w_start + (i + 3) * n_out + j]
                x0 = src[src_base + i * n : src_base + (i + 1) * n]
                x1 = src[src_base + (i + 1) * n : src_base + (i + 2) * n]
                x2 = src[src_base + (i + 2) * n : src_base + (i + 3) * n]
                x3 = src[src_base + (i + 3) * n : src_base + (i + 4) * n]
                for t in range(n):
                    z0[t] += v0 * x0[t] + v1 * x1[t] + v2 * x2[t] + v3 * x3[t]
                i += 4
            j += 1


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _activate(buf, base, size, act):
    # Branch-free bodies (selects, no libm calls) so every case vectorizes; NaN passes through.
    _activation_pass(buf[base : base + size], act)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _relu_pass(z):
    # "+ 0.0" makes the stored value differ from the loaded one (-0.0 + 0.0 is +0.0), so
    # LLVM stores every element: for "z[t] = 0 if z[t] < 0 else z[t]" it stored only the
    # negatives with a masked store, which is microcoded and slow on AMD (10x this loop)
    for t in range(z.shape[0]):
        v = z[t]
        z[t] = (0.0 if v < 0.0 else v) + 0.0


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _tanh_pass(z):
    for t in range(z.shape[0]):
        z[t] = _tanh(z[t])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _logistic_pass(z):
    for t in range(z.shape[0]):
        z[t] = _logistic(z[t])


def _activation_pass(z, act):
    """``z`` through activation ``act`` in place (compiled by its overload)."""


@overload(_activation_pass, **_OVERLOAD)
def _activation_pass_overload(z, act):
    def relu(z, act):
        _relu_pass(z)

    def tanh(z, act):
        _tanh_pass(z)

    def logistic(z, act):
        _logistic_pass(z)

    def identity(z, act):
        pass

    def any_activation(z, act):
        if act == 1:
            _relu_pass(z)
        elif act == 2:
            _tanh_pass(z)
        elif act == 3:
            _logistic_pass(z)

    return _dispatch(act, {1: relu, 2: tanh, 3: logistic}, identity) or any_activation


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def forward(theta, XT, sizes, offsets, act, n, ws):
    """Run the network on ``n`` feature-major rows; return the output's offset in ``ws``."""
    n_layers = sizes.shape[0] - 1
    src_base = 0
    dst_base = 0
    for layer in range(n_layers):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        b_start = w_start + n_in * n_out
        if layer == 0:
            # src_base (0 here) rather than a literal 0, which numba would compile separately
            _dense(XT, src_base, n_in, theta, w_start, b_start, ws, dst_base, n_out, n)
        else:
            _dense(ws, src_base, n_in, theta, w_start, b_start, ws, dst_base, n_out, n)
        if layer < n_layers - 1:
            _activate(ws, dst_base, n_out * n, act)
        src_base = dst_base
        dst_base += n_out * n
    return src_base


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, delta, delta_base, stats, cfg, marg):
    # Log-likelihood of the outputs and d loglik / d output into delta, each row's term
    # multiplied by its weight W[t]; sw is their sum (read by the Gaussian only, which the
    # caller computes once). For the Gaussian, stats[2 + o] receives the weighted
    # residual sum of squares of output o. With marg, tau[o] is replaced by the conditional
    # mean of the precision given the residuals, (a + beta sw / 2) / (b + beta ssr / 2)
    # with sw the sum of the weights: the gradient of the marginalized likelihood is the
    # fixed-noise gradient at that precision.
    return _loglik_terms(
        ws, out_base, YT, W[0:n], sw, tau, k, n, delta, delta_base, stats, cfg, marg, lik
    )


def _loglik_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg, lik):
    """:func:`_loglik_delta` for likelihood ``lik`` (compiled by its overload)."""


@overload(_loglik_terms, **_OVERLOAD)
def _loglik_terms_overload(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg,
                           marg, lik):  # fmt: skip
    def gaussian(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg, lik):
        return _gaussian_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats,
                               cfg, marg)  # fmt: skip

    def bernoulli(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg, lik):
        return _bernoulli_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats,
                                cfg, marg)  # fmt: skip

    def categorical(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg,
                    lik):  # fmt: skip
        return _categorical_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats,
                                  cfg, marg)  # fmt: skip

    def heteroscedastic(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg,
                        marg, lik):  # fmt: skip
        return _heteroscedastic_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base,
                                      stats, cfg, marg)  # fmt: skip

    def any_likelihood(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg,
                       lik):  # fmt: skip
        if lik == 0:
            return _gaussian_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base,
                                   stats, cfg, marg)  # fmt: skip
        if lik == 3:
            return _heteroscedastic_terms(ws, out_base, YT, w, sw, tau, k, n, delta,
                                          delta_base, stats, cfg, marg)  # fmt: skip
        if lik == 1:
            return _bernoulli_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base,
                                    stats, cfg, marg)  # fmt: skip
        return _categorical_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats,
                                  cfg, marg)  # fmt: skip

    variants = {0: gaussian, 1: bernoulli, 3: heteroscedastic}
    return _dispatch(lik, variants, categorical) or any_likelihood


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _gaussian_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg):
    ll = 0.0
    for o in range(k):
        ssr = 0.0
        f = ws[out_base + o * n : out_base + (o + 1) * n]
        y = YT[o * n : (o + 1) * n]
        d = delta[delta_base + o * n : delta_base + (o + 1) * n]
        for t in range(n):
            r = y[t] - f[t]
            wr = w[t] * r
            d[t] = wr
            ssr += wr * r
        stats[2 + o] = ssr
        tau_o = tau[o]
        if marg != 0:
            tau_o = (cfg.noise_shape + 0.5 * cfg.beta * sw) / (
                cfg.noise_rate + 0.5 * cfg.beta * ssr
            )
        ll += 0.5 * sw * (math.log(tau_o) - _LOG_2PI) - 0.5 * tau_o * ssr
        for t in range(n):
            d[t] *= tau_o
    return ll


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _heteroscedastic_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg):
    ll = 0.0
    # heteroscedastic: outputs [0, m) are means, [m, 2m) raw variances
    m = k // 2
    for o in range(m):
        mu = ws[out_base + o * n : out_base + (o + 1) * n]
        raw = ws[out_base + (o + m) * n : out_base + (o + m + 1) * n]
        y = YT[o * n : (o + 1) * n]
        dm = delta[delta_base + o * n : delta_base + (o + 1) * n]
        dv = delta[delta_base + (o + m) * n : delta_base + (o + m + 1) * n]
        ssr = 0.0
        # e^-|f| waits in the variance delta row (one transcendental per pass, as below)
        for t in range(n):
            dv[t] = _exp_neg(-abs(raw[t]))
        for t in range(n):
            f = raw[t]
            e = dv[t]
            var = (f if f >= 0.0 else 0.0) + _log1p_unit(e) + HETERO_MIN_VAR
            r = y[t] - mu[t]
            inv = 1.0 / var
            wt = w[t]
            ssr += wt * r * r
            ll -= 0.5 * wt * (_log(var) + _LOG_2PI + r * r * inv)
            dm[t] = wt * r * inv
            # d ll / d var times softplus'(f) = sigmoid(f)
            sig = 1.0 / (1.0 + e) if f >= 0.0 else e / (1.0 + e)
            dv[t] = 0.5 * wt * inv * (r * r * inv - 1.0) * sig
        stats[2 + o] = ssr
    return ll


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _bernoulli_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg):
    ll = 0.0
    f = ws[out_base : out_base + n]
    y = YT[0:n]
    d = delta[delta_base : delta_base + n]
    # Three passes: LLVM's inliner leaves a helper holding both exp and log out of line,
    # and the call keeps the loop scalar. e^-|f| waits in the delta row.
    for t in range(n):
        d[t] = _exp_neg(-abs(f[t]))
    for t in range(n):
        ll += w[t] * _bernoulli_ll(f[t], y[t], d[t])
    for t in range(n):
        d[t] = w[t] * _bernoulli_delta(f[t], y[t], d[t])
    return ll


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _categorical_terms(ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg):
    ll = 0.0
    if k == 1:
        # a single class: log-sum-exp is f itself, kept as f - f so non-finite f shows
        f = ws[out_base : out_base + n]
        y = YT[0:n]
        d = delta[delta_base : delta_base + n]
        for t in range(n):
            g = f[t] - f[t]
            ll += w[t] * y[t] * g
            d[t] = w[t] * (y[t] - _exp_neg(g))
    else:
        # Softmax in passes over rows (the vectorized direction), one class at a time. Delta
        # rows 0 and 1 are scratch for the row max (then the log-sum-exp) and the sum of
        # exponentials. Row 0 is overwritten last through the same view it is read from: a
        # second view of it fails LLVM's run-time overlap check and runs scalar (1.6x slower).
        lse = delta[delta_base : delta_base + n]
        tot = delta[delta_base + n : delta_base + 2 * n]
        f = ws[out_base : out_base + n]
        for t in range(n):
            lse[t] = f[t]
        for o in range(1, k):
            f = ws[out_base + o * n : out_base + (o + 1) * n]
            for t in range(n):
                # + 0.0 so every element is stored (see _activate): the sign of a zero
                # maximum does not matter
                lse[t] = (f[t] if f[t] > lse[t] else lse[t]) + 0.0
        for t in range(n):
            tot[t] = 0.0
        for o in range(k):
            f = ws[out_base + o * n : out_base + (o + 1) * n]
            for t in range(n):
                tot[t] += _exp_neg(f[t] - lse[t])
        for t in range(n):
            # the max term contributes exactly 1, so tot >= 1 unless it is NaN
            lse[t] += _log(tot[t])
        for o in range(k - 1, -1, -1):
            f = ws[out_base + o * n : out_base + (o + 1) * n]
            y = YT[o * n : (o + 1) * n]
            if o > 0:
                d = delta[delta_base + o * n : delta_base + (o + 1) * n]
                for t in range(n):
                    g = f[t] - lse[t]
                    ll += w[t] * y[t] * g
                    d[t] = w[t] * (y[t] - _exp_neg(g))
            else:
                for t in range(n):
                    g = f[t] - lse[t]
                    ll += w[t] * y[t] * g
                    lse[t] = w[t] * (y[t] - _exp_neg(g))
    return ll


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _wgrad(src, n_in, delta, n_out, n, grad, w_start, b_start, beta):
    # grad[W[i, j]] += beta * src[i, :] . delta[j, :] and grad[b[j]] += beta * sum(delta[j, :]).
    # Four outputs and four inputs per pass over the rows where the CPU has the registers
    # (_FOUR_BY_FOUR, AVX-512): eight loads feed sixteen FMAs into sixteen independent sums,
    # where two outputs' passes are bound by their loads (six for eight FMAs). The outputs
    # that do not fill a four (all of them without AVX-512) go by two, a last odd one
    # paired with itself (its sums twice, one of them dropped): a pass of its own for one
    # output would add to the compile of every network kernel.
    j = 0
    if _FOUR_BY_FOUR:
        while j + 4 <= n_out:
            d0 = delta[j * n : (j + 1) * n]
            d1 = delta[(j + 1) * n : (j + 2) * n]
            d2 = delta[(j + 2) * n : (j + 3) * n]
            d3 = delta[(j + 3) * n : (j + 4) * n]
            i = 0
            while i + 4 <= n_in:
                x0 = src[i * n : (i + 1) * n]
                x1 = src[(i + 1) * n : (i + 2) * n]
                x2 = src[(i + 2) * n : (i + 3) * n]
                x3 = src[(i + 3) * n : (i + 4) * n]
                s00 = s01 = s02 = s03 = s10 = s11 = s12 = s13 = 0.0
                s20 = s21 = s22 = s23 = s30 = s31 = s32 = s33 = 0.0
                for t in range(n):
                    a0 = d0[t]
                    a1 = d1[t]
                    a2 = d2[t]
                    a3 = d3[t]
                    e0 = x0[t]
                    e1 = x1[t]
                    e2 = x2[t]
                    e3 = x3[t]
                    s00 += e0 * a0
                    s01 += e0 * a1
                    s02 += e0 * a2
                    s03 += e0 * a3
                    s10 += e1 * a0
                    s11 += e1 * a1
                    s12 += e1 * a2
                    s13 += e1 * a3
                    s20 += e2 * a0
                    s21 += e2 * a1
                    s22 += e2 * a2
                    s23 += e2 * a3
                    s30 += e3 * a0
                    s31 += e3 * a1
                    s32 += e3 * a2
                    s33 += e3 * a3
                g = w_start + i * n_out + j
                grad[g] += beta * s00
                grad[g + 1] += beta * s01
                grad[g + 2] += beta * s02
                grad[g + 3] += beta * s03
                g += n_out
                grad[g] += beta * s10
                grad[g + 1] += beta * s11
                grad[g + 2] += beta * s12
                grad[g + 3] += beta * s13
                g += n_out
                grad[g] += beta * s20
                grad[g + 1] += beta * s21
                grad[g + 2] += beta * s22
                grad[g + 3] += beta * s23
                g += n_out
                grad[g] += beta * s30
                grad[g + 1] += beta * s31
                grad[g + 2] += beta * s32
                grad[g + 3] += beta * s33
                i += 4
            # the inputs left over, one per pass, and the biases in a pass of their own
            while i < n_in:
                x0 = src[i * n : (i + 1) * n]
                s00 = s01 = s02 = s03 = 0.0
                for t in range(n):
                    e0 = x0[t]
                    s00 += e0 * d0[t]
                    s01 += e0 * d1[t]
                    s02 += e0 * d2[t]
                    s03 += e0 * d3[t]
                g = w_start + i * n_out + j
                grad[g] += beta * s00
                grad[g + 1] += beta * s01
                grad[g + 2] += beta * s02
                grad[g + 3] += beta * s03
                i += 1
            s00 = s01 = s02 = s03 = 0.0
            for t in range(n):
                s00 += d0[t]
                s01 += d1[t]
                s02 += d2[t]
                s03 += d3[t]
            grad[b_start + j] += beta * s00
            grad[b_start + j + 1] += beta * s01
            grad[b_start + j + 2] += beta * s02
            grad[b_start + j + 3] += beta * s03
            j += 4
    while j < n_out:
        two = j + 1 < n_out
        d0 = delta[j * n : (j + 1) * n]
        d1 = delta[(j + 1) * n : (j + 2) * n] if two else d0
        i = 0
        while i + 4 <= n_in:
            x0 = src[i * n : (i + 1) * n]
            x1 = src[(i + 1) * n : (i + 2) * n]
            x2 = src[(i + 2) * n : (i + 3) * n]
            x3 = src[(i + 3) * n : (i + 4) * n]
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            s3 = 0.0
            r0 = 0.0
            r1 = 0.0
            r2 = 0.0
            r3 = 0.0
            for t in range(n):
                a = d0[t]
                b = d1[t]
                e0 = x0[t]
                e1 = x1[t]
                e2 = x2[t]
                e3 = x3[t]
                s0 += e0 * a
                s1 += e1 * a
                s2 += e2 * a
                s3 += e3 * a
                r0 += e0 * b
                r1 += e1 * b
                r2 += e2 * b
                r3 += e3 * b
            g = w_start + i * n_out + j
            grad[g] += beta * s0
            grad[g + n_out] += beta * s1
            grad[g + 2 * n_out] += beta * s2
            grad[g + 3 * n_out] += beta * s3
            if two:
                grad[g + 1] += beta * r0
                grad[g + n_out + 1] += beta * r1
                grad[g + 2 * n_out + 1] += beta * r2
                grad[g + 3 * n_out + 1] += beta * r3
            i += 4
        while i < n_in:
            x0 = src[i * n : (i + 1) * n]
            s0 = 0.0
            r0 = 0.0
            for t in range(n):
                s0 += x0[t] * d0[t]
                r0 += x0[t] * d1[t]
            grad[w_start + i * n_out + j] += beta * s0
            if two:
                grad[w_start + i * n_out + j + 1] += beta * r0
            i += 1
        s0 = 0.0
        r0 = 0.0
        for t in range(n):
            s0 += d0[t]
            r0 += d1[t]
        grad[b_start + j] += beta * s0
        if two:
            grad[b_start + j + 1] += beta * r0
        j += 2


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _backward(theta, XT, sizes, offsets, act, n, ws, grad, beta):
    # Backpropagate the output delta (already in the first delta buffer) into grad,
    # scaled by beta. Hidden activations are read back from ws.
    n_layers = sizes.shape[0] - 1
    total = 0
    widest = 0
    for layer in range(1, n_layers + 1):
        total += sizes[layer] * n
        widest = max(widest, sizes[layer])
    cur = total * 1
    nxt = total + widest * n
    act_end = total - sizes[n_layers] * n  # start of the output block
    for layer in range(n_layers - 1, -1, -1):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        b_start = w_start + n_in * n_out
        in_base = act_end - n_in * n
        delta = ws[cur : cur + n_out * n]
        if layer == 0:
            _wgrad(XT, n_in, delta, n_out, n, grad, w_start, b_start, beta)
            break
        _wgrad(ws[in_base:act_end], n_in, delta, n_out, n, grad, w_start, b_start, beta)
        _delta_below(theta, ws, delta, nxt, in_base, n_in, n_out, w_start, n, act)
        cur, nxt = nxt, cur
        act_end = in_base


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _delta_below(theta, ws, delta, nxt, in_base, n_in, n_out, w_start, n, act):
    # delta of the layer below into ws[nxt:]: (W delta) times the activation's derivative,
    # read back from the activations at ws[in_base:]. Two outputs per pass; the pass over
    # the last one or two also applies the derivative, so a single-output layer above (the
    # usual regression head) takes one pass per unit.
    # The derivative as (c0 + a (c1 + c2 a)) times (1 if a > 0 else z), for the pass that
    # follows earlier ones: 1 - a^2 (tanh), a (1 - a) (logistic), a 0/1 mask (ReLU), 1.
    c0 = 0.0 if act == 3 else 1.0
    c1 = 1.0 if act == 3 else 0.0
    c2 = -1.0 if act == 2 or act == 3 else 0.0
    z = 0.0 if act == 1 else 1.0
    for i in range(n_in):
        nd = ws[nxt + i * n : nxt + (i + 1) * n]
        row = w_start + i * n_out
        j = 0
        while j + 2 < n_out:
            w0 = theta[row + j]
            w1 = theta[row + j + 1]
            d0 = delta[j * n : (j + 1) * n]
            d1 = delta[(j + 1) * n : (j + 2) * n]
            if j == 0:
                for t in range(n):
                    nd[t] = w0 * d0[t] + w1 * d1[t]
            else:
                for t in range(n):
                    nd[t] += w0 * d0[t] + w1 * d1[t]
            j += 2
        w0 = theta[row + j]
        d0 = delta[j * n : (j + 1) * n]
        # a single last output pairs with itself at weight 0
        two = j + 1 < n_out
        w1 = theta[row + j + 1] if two else 0.0
        d1 = delta[(j + 1) * n : (j + 2) * n] if two else d0
        a = ws[in_base + i * n : in_base + (i + 1) * n]
        if j > 0:
            for t in range(n):
                at = a[t]
                g = (c0 + at * (c1 + c2 * at)) * (1.0 if at > 0.0 else z)
                nd[t] = (nd[t] + w0 * d0[t] + w1 * d1[t]) * g
        else:
            _first_delta_pass(nd, w0, d0, w1, d1, a, n, act)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _relu_delta(nd, w0, d0, w1, d1, a, n):
    # a multiply by a 0/1 mask, not a select of 0: LLVM turned the select into a branch
    # per row, which mispredicts on every sign change of the units (half the cost of a
    # gradient with fresh parameters)
    for t in range(n):
        nd[t] = (w0 * d0[t] + w1 * d1[t]) * (1.0 if a[t] > 0.0 else 0.0)


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _tanh_delta(nd, w0, d0, w1, d1, a, n):
    for t in range(n):
        nd[t] = (w0 * d0[t] + w1 * d1[t]) * (1.0 - a[t] * a[t])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _logistic_delta(nd, w0, d0, w1, d1, a, n):
    for t in range(n):
        nd[t] = (w0 * d0[t] + w1 * d1[t]) * (a[t] * (1.0 - a[t]))


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _identity_delta(nd, w0, d0, w1, d1, a, n):
    for t in range(n):
        nd[t] = w0 * d0[t] + w1 * d1[t]


def _first_delta_pass(nd, w0, d0, w1, d1, a, n, act):
    """The one pass of :func:`_delta_below` over a unit's first one or two outputs, with
    the derivative of activation ``act`` at ``a`` (compiled by its overload)."""


@overload(_first_delta_pass, **_OVERLOAD)
def _first_delta_pass_overload(nd, w0, d0, w1, d1, a, n, act):
    def relu(nd, w0, d0, w1, d1, a, n, act):
        _relu_delta(nd, w0, d0, w1, d1, a, n)

    def tanh(nd, w0, d0, w1, d1, a, n, act):
        _tanh_delta(nd, w0, d0, w1, d1, a, n)

    def logistic(nd, w0, d0, w1, d1, a, n, act):
        _logistic_delta(nd, w0, d0, w1, d1, a, n)

    def identity(nd, w0, d0, w1, d1, a, n, act):
        _identity_delta(nd, w0, d0, w1, d1, a, n)

    def any_activation(nd, w0, d0, w1, d1, a, n, act):
        if act == 1:
            _relu_delta(nd, w0, d0, w1, d1, a, n)
        elif act == 2:
            _tanh_delta(nd, w0, d0, w1, d1, a, n)
        elif act == 3:
            _logistic_delta(nd, w0, d0, w1, d1, a, n)
        else:
            _identity_delta(nd, w0, d0, w1, d1, a, n)

    variants = {1: relu, 2: tanh, 3: logistic}
    return _dispatch(act, variants, identity) or any_activation


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _jacobian_rows(src, n_in, delta, n_out, n, J, w_start, b_start):
    # Per-row gradients of one layer: J[w_ij, t] = src[i, t] delta[j, t], J[b_j, t] = delta[j, t]
    for j in range(n_out):
        d = delta[j * n : (j + 1) * n]
        jb = J[b_start + j]
        for t in range(n):
            jb[t] = d[t]
        for i in range(n_in):
            x = src[i * n : (i + 1) * n]
            row = J[w_start + i * n_out + j]
            for t in range(n):
                row[t] = x[t] * d[t]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def jacobian(theta, XT, sizes, offsets, act, n, first_layer, ws, out, J):
    """Network outputs and their Jacobian in the parameters, row by row.

    The Laplace approximation's generalized Gauss-Newton matrix and linearized predictive
    are built from it. Only the parameters of layers ``first_layer`` and above are
    differentiated (``first_layer = n_layers - 1`` is the last layer alone).

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
    XT, sizes, offsets, act, n
        Feature-major rows and the network, as :func:`forward` takes them.
    first_layer : int
    ws : ndarray
        Workspace of at least ``workspace_size(sizes, n)``.
    out : ndarray of shape (k, n)
        Receives the network outputs.
    J : ndarray of shape (k, q, n)
        Receives ``d out[o, t] / d theta[offsets[first_layer] + i]`` at ``J[o, i, t]``, for
        the ``q = n_weights - offsets[first_layer]`` parameters from that layer on. Rows
        are the innermost axis, as everywhere in the kernels.
    """
    n_layers = sizes.shape[0] - 1
    k = sizes[n_layers]
    out_base = forward(theta, XT, sizes, offsets, act, n, ws)
    for o in range(k):
        for t in range(n):
            out[o, t] = ws[out_base + o * n + t]
    widest = 0
    for layer in range(1, n_layers + 1):
        widest = max(widest, sizes[layer])
    total = out_base + k * n
    base0 = offsets[first_layer]
    for o in range(k):
        cur = total
        nxt = total + widest * n
        # the output's derivative in itself: a one-hot delta over the outputs
        for j in range(k):
            d = ws[cur + j * n : cur + (j + 1) * n]
            one = 1.0 if j == o else 0.0
            for t in range(n):
                d[t] = one
        act_end = out_base
        for layer in range(n_layers - 1, first_layer - 1, -1):
            n_in = sizes[layer]
            n_out = sizes[layer + 1]
            w_start = offsets[layer]
            b_start = w_start + n_in * n_out
            in_base = act_end - n_in * n
            delta = ws[cur : cur + n_out * n]
            if layer == 0:
                _jacobian_rows(XT, n_in, delta, n_out, n, J[o], w_start - base0,
                               b_start - base0)  # fmt: skip
                break
            _jacobian_rows(ws[in_base:act_end], n_in, delta, n_out, n, J[o],
                           w_start - base0, b_start - base0)  # fmt: skip
            if layer == first_layer:
                break
            _delta_below(theta, ws, delta, nxt, in_base, n_in, n_out, w_start, n, act)
            cur, nxt = nxt, cur
            act_end = in_base


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _noise_terms(theta, tgt, k, n_w):
    # With the noise in theta (log precisions eta), move it into tau and return the log
    # prior of eta: tau ~ Gamma(a, b) gives log p(eta) = a*eta - b*e^eta + a log b - lgamma(a).
    tau = tgt.tau
    a = tgt.cfg[0].noise_shape
    b = tgt.cfg[0].noise_rate
    lp = 0.0
    for o in range(k):
        eta = theta[n_w + o]
        tau[o] = math.exp(eta)
        lp += a * eta - b * tau[o] + a * math.log(b) - math.lgamma(a)
    return lp


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def n_rows(tgt):
    """Number of data rows of a kernel target."""
    return tgt.XT.shape[0] // tgt.sizes[0]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def weight_sum(tgt):
    """Sum of the row weights of a kernel target: its number of rows, counted by weight."""
    total = 0.0
    for t in range(tgt.W.shape[0]):
        total += tgt.W[t]
    return total


@njit(cache=True, nogil=True, error_model="numpy")
def workspace_size(sizes, n):
    """Length of the scratch buffer :func:`logp_grad` needs for ``n`` rows: every layer's
    activations and two delta buffers of the widest layer."""
    total = 0
    widest = 0
    for layer in range(1, sizes.shape[0]):
        total += sizes[layer]
        widest = max(widest, sizes[layer])
    return (total + 2 * widest) * n


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def log_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    """The prior's log density of ``theta[:n_w]`` (the network parameters), and with
    ``with_grad`` its gradient written over ``grad[:n_w]``: ``prior`` (``cfg.prior``, or
    a constant, see :func:`logp_grad_for`) 0 Gaussian (sds ``prior_scale``), 1 logistic
    (scales) or 2 the scale mixture (first sds), each centred at ``prior_mean``."""
    return _prior_terms(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior)


def _prior_terms(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    """:func:`log_prior` for prior ``prior`` (compiled by its overload)."""


@overload(_prior_terms, **_OVERLOAD)
def _prior_terms_overload(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
    def logistic(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def mixture(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def gaussian(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        return _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    def any_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior):
        if prior == 1:
            return _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)
        if prior == 2:
            return _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)
        return _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad)

    return _dispatch(prior, {1: logistic, 2: mixture}, gaussian) or any_prior


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _logistic_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    for i in range(n_w):
        s = prior_scale[i]
        lp += _logistic_logpdf((theta[i] - prior_mean[i]) / s) - _log(s)
    if with_grad:
        for i in range(n_w):
            # d/dw log p(w) = -tanh((w - mu) / 2s) / s
            s = prior_scale[i]
            grad[i] = -_tanh(0.5 * (theta[i] - prior_mean[i]) / s) / s
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _mixture_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    lp -= 0.5 * n_w * _LOG_2PI
    log_w1 = math.log(cfg.mix_weight)
    log_w2 = math.log1p(-cfg.mix_weight)
    for i in range(n_w):
        s = prior_scale[i]
        lpi, dlpi = _mixture_logpdf(theta[i] - prior_mean[i], s, cfg.mix_ratio * s,
                                    log_w1, log_w2)  # fmt: skip
        lp += lpi
        if with_grad:
            grad[i] = dlpi
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _gaussian_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad):
    lp = 0.0
    lp -= 0.5 * n_w * _LOG_2PI
    for i in range(n_w):
        s = prior_scale[i]
        z = (theta[i] - prior_mean[i]) / s
        # _log, not math.log: a libm call per parameter kept the loop scalar and cost
        # about a seventh of a 13-10-1 gradient
        lp -= 0.5 * z * z + _log(s)
    if with_grad:
        for i in range(n_w):
            s = prior_scale[i]
            grad[i] = -(theta[i] - prior_mean[i]) / (s * s)
    return lp


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def logp_grad(theta, tgt, ws, grad, stats, with_grad):
    """Tempered log-density ``beta * loglik + logprior`` and, optionally, its gradient.

    The activation, likelihood and prior are read from ``tgt.cfg`` at run time, so one
    compiled kernel serves every network; :func:`logp_grad_for` compiles the same code for
    one of each, which is what the samplers and the training engine call.

    Parameters
    ----------
    theta : ndarray of shape (n_params,)
    tgt : tuple
        The target tuple described in the module docstring.
    ws : ndarray
        Workspace of at least ``layout.workspace_size(n_rows)``.
    grad : ndarray of shape (n_params,)
        Overwritten with the gradient when ``with_grad``.
    stats : ndarray of shape (2 + n_outputs,)
        Receives ``[loglik, logprior, ssr_0, ...]``. With the noise marginalized, ``loglik``
        is evaluated at the conditional mean of each noise precision.
    with_grad : bool

    Returns
    -------
    float
        ``beta * loglik + logprior`` (may be ``-inf`` or NaN for a diverging ``theta``). With
        the noise marginalized, ``log int p(y | theta, tau)^beta p(tau) dtau + logprior``.
    """
    cfg = tgt.cfg[0]
    return _logp_grad(
        theta, tgt, ws, grad, stats, with_grad, cfg.activation, cfg.likelihood, cfg.prior
    )


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _logp_grad(theta, tgt, ws, grad, stats, with_grad, act, lik, prior):
    # logp_grad's body, inlined into it and into logp_grad_for's kernels, which pass the
    # activation, likelihood and prior codes as constants: the kernels it calls then compile
    # for those constants only (see _jit.LITERAL_PARAMETERS)
    XT, YT, W, sizes, offsets, prior_mean, prior_scale, tau, cfgs = tgt
    cfg = cfgs[0]
    n = XT.shape[0] // sizes[0]
    n_noise = cfg.n_noise
    beta = cfg.beta
    n_layers = sizes.shape[0] - 1
    k = sizes[n_layers]
    n_w = theta.shape[0] - n_noise

    lp_noise = 0.0
    if n_noise > 0:
        lp_noise = _noise_terms(theta, tgt, k, n_w)

    out_base = forward(theta, XT, sizes, offsets, act, n, ws)
    total = out_base + k * n
    marg = cfg.noise_marginal if lik == 0 else 0
    # the weighted row count, once per evaluation, for the Gaussian's normalization
    sw = weight_sum(tgt) if lik == 0 else 0.0
    ll = _loglik_delta(ws, out_base, YT, W, sw, tau, lik, k, n, ws, total, stats, cfg, marg)

    lp = lp_noise + log_prior(theta, prior_mean, prior_scale, cfg, n_w, grad, with_grad, prior)
    stats[0] = ll
    stats[1] = lp

    if with_grad:
        _backward(theta, XT, sizes, offsets, act, n, ws, grad, beta)
        if n_noise > 0:
            a = cfg.noise_shape
            b = cfg.noise_rate
            for o in range(k):
                # d/d eta of [0.5 sw eta - 0.5 e^eta ssr] and of the Gamma log prior
                grad[n_w + o] = beta * (0.5 * sw - 0.5 * tau[o] * stats[2 + o]) + a - b * tau[o]
    if marg != 0:
        return log_marginal(sw, k, stats, cfg.noise_shape, cfg.noise_rate, beta) + lp
    return beta * ll + lp


@functools.cache
def logp_grad_for(
    activation: int, likelihood: int, prior: int
) -> numba.core.registry.CPUDispatcher:
    """:func:`logp_grad` compiled for one activation, likelihood and prior (their codes in
    ``cfg``, which it then does not read).

    The codes reach the kernels below it as constants, so numba prunes the other branches
    before typing them: a cold compile of the network kernel took 6.9-7.4 s instead of
    9.9-10.9 s for the quickstart's network (doc/performance.md). The kernels are cached
    on disk per combination, like any other.

    Parameters
    ----------
    activation, likelihood, prior : int
        ``cfg``'s ``activation``, ``likelihood`` and ``prior`` codes.

    Returns
    -------
    numba dispatcher
        A kernel with :func:`logp_grad`'s parameters and result.
    """
    activation, likelihood, prior = int(activation), int(likelihood), int(prior)

    def kernel(theta, tgt, ws, grad, stats, with_grad):
        return _logp_grad(theta, tgt, ws, grad, stats, with_grad, activation, likelihood, prior)

    return njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)(
        _named(kernel, f"logp_grad_{activation}_{likelihood}_{prior}")
    )


def _named(func, name: str):
    # numba names a kernel's machine code and cache files after its qualified name: two
    # closures of one name and signature, compiled in two processes and loaded from the
    # cache into a third, can get the same symbol there, and the address looked up for
    # one is then the other's (a fit then sampled another likelihood's posterior)
    func.__name__ = func.__qualname__ = name
    return func


def target_codes(tgt) -> tuple[int, int, int]:
    """The activation, likelihood and prior codes of a :data:`KernelTarget` or
    :data:`DensityTarget`: the arguments of :func:`logp_grad_for`."""
    cfg = tgt.cfg[0]
    return int(cfg["activation"]), int(cfg["likelihood"]), int(cfg["prior"])


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)
def log_marginal(n, k, stats, a, b, beta):
    """Log of ``int p(y | theta, tau)^beta Gamma(tau | a, b) dtau``, summed over outputs.

    ``n`` is the (weighted) number of rows, a float; ``stats[2 + o]`` holds output ``o``'s
    (weighted) residual sum of squares. The Gamma integral is ``lgamma(a') - a' log b'`` with
    ``a' = a + beta n / 2`` and ``b' = b + beta ssr / 2``.
    """
    a_post = a + 0.5 * beta * n
    out = 0.0
    for o in range(k):
        out += (
            math.lgamma(a_post) - math.lgamma(a) + a * math.log(b)
            - a_post * math.log(b + 0.5 * beta * stats[2 + o]) - 0.5 * beta * n * _LOG_2PI
        )  # fmt: skip
    return out


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def density(q, tgt, ws, grad, stats, with_grad):
    """:func:`logp_grad` of a :data:`DensityTarget` (same parameters), through the compiled
    function it carries.

    The call goes through a pointer, so a kernel that calls this one is compiled without a
    copy of :func:`logp_grad` and the tree below it: numba links every kernel a caller calls
    into the caller's own machine code, optimizing and emitting it again, which made the
    network kernel's code most of each sampler's compile time. A gradient costs microseconds;
    an indirect call, nanoseconds.
    """
    # the nested target is passed as it is: building one here would cost a reference count
    # per array and call
    return tgt.density(q, tgt.target, ws, grad, stats, with_grad)


class CompiledKernel(WrapperAddressProtocol):
    """A kernel compiled (or loaded from numba's cache) for one signature and handed to
    other kernels by address: numba's first-class function type.

    A kernel that takes it is compiled for its signature, not for the function, and calls
    it through a pointer: numba links no copy of it (and of the tree below it) into the
    caller's machine code, and the two can compile at once in two processes
    (:func:`compile_aside`). The address is looked up in each process (a pickled one
    compiles or loads its kernel again where it is unpickled).

    Parameters
    ----------
    sig : numba.core.typing.Signature
        The signature to compile for.
    source : tuple
        ``(module, name, args)``: the kernel is the attribute ``name`` of the module, or,
        when ``args`` is not None, what that attribute returns for ``args`` (a factory such
        as :func:`logp_grad_for`). Picklable, so a helper process can find the kernel.
    """

    def __init__(self, sig: numba.core.typing.Signature, source: tuple) -> None:
        self._sig = sig
        self._source = source
        self._address = None
        self._helper = None
        self._aside = False
        self._lock = threading.Lock()

    def resolve(self) -> int:
        """Compile or load the kernel (once a helper process compiling it has cached it,
        or ended); return the address of its C-callable wrapper."""
        with self._lock:
            if self._address is None:
                if self._helper is not None:
                    # its line when the kernel is in the cache, or the end of a helper that
                    # failed: compiling here covers either. The helper may go on to other
                    # kernels while this process samples; it is not waited for.
                    self._helper.wait_for(self._job)
                    self._helper = None
                kernel = self.dispatcher()
                kernel.compile(self._sig.args)
                cres = kernel.get_compile_result(self._sig)
                name = cres.fndesc.llvm_cfunc_wrapper_name
                self._address = cres.library.get_pointer_to_function(name)
            return self._address

    def __wrapper_address__(self) -> int:
        """:meth:`resolve`: numba asks for it when a kernel is called with this object."""
        return self.resolve()

    def signature(self) -> numba.core.typing.Signature:
        """The numba signature it is compiled for."""
        return self._sig

    @property
    def compiled_aside(self) -> bool:
        """Whether a helper process was started to compile it (:func:`compile_aside`)."""
        return self._aside

    def dispatcher(self) -> numba.core.registry.CPUDispatcher:
        """The kernel it is the address of: for calls from Python."""
        return _kernel_of(self._source)

    def _needs_compiling(self) -> bool:
        return (
            self._address is None
            and self._helper is None
            and not _cached(self.dispatcher(), self._sig)
        )

    def __reduce__(self):
        return (_resolved_kernel, (self._sig, self._source))


def density_source(codes: tuple[int, int, int] | None) -> tuple:
    """The :class:`CompiledKernel` source of a :data:`DensityTarget`'s ``density``:
    :func:`logp_grad_for` the activation, likelihood and prior ``codes``
    (:func:`target_codes`), or :func:`logp_grad`, which reads them at run time, for None."""
    if codes is None:
        return (__name__, "logp_grad", None)
    return (__name__, "logp_grad_for", tuple(int(c) for c in codes))


def _kernel_of(source: tuple) -> numba.core.registry.CPUDispatcher:
    import importlib

    module, name, args = source
    kernel = getattr(importlib.import_module(module), name)
    return kernel if args is None else kernel(*args)


class _Helper:
    # one helper process and the lines it has printed so far, one per kernel it has cached:
    # the kernels it compiles wait for their own line
    def __init__(self, process: subprocess.Popen, n_jobs: int) -> None:
        self._process = process
        self._n_jobs = n_jobs
        self._lines = 0
        self._lock = threading.Lock()

    def wait_for(self, job: int) -> None:
        with self._lock:
            while self._lines <= job:
                if not self._process.stdout.readline():
                    self._lines = sys.maxsize  # ended (or failed): nothing more to wait for
                    break
                self._lines += 1
            if self._lines >= self._n_jobs and not self._process.stdout.closed:
                self._process.stdout.close()  # every line read: the rest is not waited for


def compile_aside(*kernels: CompiledKernel, activation: int | None = None) -> None:
    """Start compiling ``kernels`` into numba's cache in one helper process, in this order,
    skipping those compiled or cached already; each one's :meth:`CompiledKernel.resolve`
    then waits until the helper has cached it, and loads it. The helper goes on to compile
    the kernels of a first prediction (:func:`forward_batch_for` ``activation`` unless it
    is None, :func:`skbnn.kernels.predict.mixture_quantiles`) and ends; :func:`wait_for_helpers`
    waits for that.

    Nothing is started when :func:`compile_aside_enabled` is False or every kernel is
    cached: each then compiles or loads where it is first called. A kernel that calls these
    through their addresses compiles without their code, so the two processes compile at
    once, on two cores in about the time of the longer: the cold quickstart's compiling went
    from 30-34 s to about 20 s on 2 cores (doc/performance.md).
    """
    if not compile_aside_enabled():
        return
    todo = [k for k in dict.fromkeys(kernels) if k._needs_compiling()]
    if not todo:
        return
    jobs = [(k._sig, k._source) for k in todo]
    try:
        process = subprocess.Popen(
            [sys.executable, "-c", _COMPILE_ASIDE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        process.stdin.write(pickle.dumps((jobs, activation)))
        process.stdin.close()
    except (OSError, pickle.PicklingError):  # no helper: each compiles where it is called
        return
    _BACKGROUND[:] = [p for p in _BACKGROUND if p.poll() is None]
    _BACKGROUND.append(process)
    helper = _Helper(process, len(todo))
    for job, kernel in enumerate(todo):
        with kernel._lock:
            kernel._helper, kernel._job, kernel._aside = helper, job, True


# what the helper process of compile_aside runs: this very package's kernels (not a skbnn
# the working folder might hold), with the jobs from stdin. The package is registered as an
# empty module so that its __init__, which imports the estimators and scikit-learn, does
# not run: the kernels need only numba, and the helper's start is on the cold fit's critical
# path (1.2 s of its 1.8 s of imports). It prints a line once each kernel is in the cache,
# then goes on with the kernels a first prediction compiles (1-1.5 s), while the fit's
# process, no longer waiting, samples. It never collects garbage: it lives only to compile,
# and numba's compiler leaves cycles behind that every collection would walk again.
_COMPILE_ASIDE = (
    "import gc, pickle, sys, types\n"
    "gc.disable()\n"
    "package = types.ModuleType('skbnn')\n"
    f"package.__path__ = [{os.path.dirname(os.path.dirname(__file__))!r}]\n"
    "sys.modules['skbnn'] = package\n"
    "from skbnn.kernels import network, predict\n"
    "jobs, activation = pickle.load(sys.stdin.buffer)\n"
    "for sig, source in jobs:\n"
    "    network._kernel_of(source).compile(sig.args)\n"
    "    print('cached', flush=True)\n"
    "if activation is not None:\n"
    "    network.forward_batch_for(activation).compile(network.FORWARD_BATCH_ARGS)\n"
    "predict.mixture_quantiles.compile(predict.MIXTURE_QUANTILES_ARGS)\n"
)

# helper processes that may still be compiling: referenced until they end, so that none is
# collected (and warned about) while it runs
_BACKGROUND: list = []


def wait_for_helpers(*kernels, timeout: float = 10.0) -> None:
    """Unless every one of ``kernels`` is compiled in this process already, wait (at most
    ``timeout`` seconds each) for the helper processes of :func:`compile_aside` to end:
    prediction's kernels are then in the cache. A first prediction right after a cold fit
    calls it rather than compile them a second time."""
    if kernels and all(k.signatures for k in kernels):
        return
    for process in _BACKGROUND:
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass


@atexit.register
def _finish_background() -> None:
    # a process that ends right after a cold fit lets its helper finish caching prediction's
    # kernels (a second or two) for the next process, and leaves no process behind
    for helper in _BACKGROUND:
        try:
            helper.wait(timeout=10)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()


def _cached(kernel, sig) -> bool:
    """Whether ``kernel`` is compiled for ``sig`` in this process or in numba's cache (its
    index, read without loading the code); True when numba's cache cannot tell."""
    if tuple(sig.args) in kernel.overloads:
        return True
    try:
        cache = kernel._cache
        # keyed as numba's own compile keys it: by the tuple of argument types
        key = cache._index_key(tuple(sig.args), kernel.targetctx.codegen())
        return key in cache._cache_file._load_index()
    except Exception:  # a numba without these internals, or no cache: compile here
        return True


def compile_aside_enabled() -> bool:
    """Whether :func:`density_target` with ``aside=True`` may start a helper process: the
    environment variable ``SKBNN_COMPILE_ASIDE`` (``0`` or ``1``) if set, otherwise when
    numba caches the kernels and this process may run on more than one core."""
    setting = os.environ.get("SKBNN_COMPILE_ASIDE", "").strip()
    if setting:
        return setting not in ("0", "false", "False", "no")
    if getattr(sys, "frozen", False) or "python" not in os.path.basename(sys.executable).lower():
        return False  # sys.executable may not be a Python that can run the helper
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return CACHE and cores > 1


@functools.cache
def compiled_kernel(sig: numba.core.typing.Signature, source: tuple) -> CompiledKernel:
    """The one :class:`CompiledKernel` of this process for ``sig`` and ``source``, so that a
    fit finds the one its warm-up started a helper process for."""
    return CompiledKernel(sig, source)


def _resolved_kernel(sig, source) -> CompiledKernel:
    kernel = compiled_kernel(sig, source)
    kernel.resolve()
    return kernel


_VECTOR = types.Array(types.float64, 1, "C")
_INDEX = types.Array(types.int64, 1, "C")

#: The argument types prediction calls :func:`forward_batch_for`'s kernels with (C arrays).
FORWARD_BATCH_ARGS = (
    types.Array(types.float64, 2, "C"), _VECTOR, _INDEX, _INDEX, types.int64,
    types.Array(types.float64, 3, "C"),
)  # fmt: skip


def density_target(
    tgt: KernelTarget,
    aside: bool = False,
    codes: tuple[int, int, int] | None = None,
    specialized: bool = True,
    aside_with: tuple = (),
) -> DensityTarget:
    """``tgt`` with :func:`logp_grad_for` its codes (:func:`target_codes`), compiled for its
    types, as its ``density`` field.

    Parameters
    ----------
    tgt : KernelTarget
    aside : bool, default=False
        If the function is neither compiled nor cached, compile it in a helper process
        (:func:`compile_aside`, when :func:`compile_aside_enabled`) while this one
        compiles the kernel it is first passed to; otherwise compile or load it now.
    codes : tuple of int, default=None
        The activation, likelihood and prior to compile for instead of ``tgt``'s (the
        warm-up problems of a fit's first compile stand in for its target).
    specialized : bool, default=True
        False: :func:`logp_grad` itself, which reads the codes at run time (for the
        variational methods, whose own kernels compile its branches anyway).
    aside_with : tuple of CompiledKernel, default=()
        With ``aside``: other kernels for the same helper process to compile after it
        (the NUTS kernel's bookkeeping, :func:`skbnn.kernels.chain.compiled_after`).

    Returns
    -------
    DensityTarget
        The same arrays (kernels that write ``tau``, ``cfg`` or ``prior_scale`` write
        ``tgt``'s), plus the compiled log density.
    """
    sig = types.float64(_VECTOR, numba.typeof(tgt), _VECTOR, _VECTOR, _VECTOR, types.boolean)
    if not specialized:
        codes = None
    elif codes is None:
        codes = target_codes(tgt)
    source = density_source(codes)
    density = compiled_kernel(sig, source)
    if aside and compile_aside_enabled():
        compile_aside(density, *aside_with, activation=None if codes is None else int(codes[0]))
    else:
        density.resolve()
    return DensityTarget(*tgt, tgt, density)


# numba types a tuple that holds an object other than arrays and numbers (the compiled
# density) in Python, field by field, on every call of a kernel from Python: 0.7 ms a call,
# most of it the settings' record dtype, against 3-5 us for a KernelTarget. The type follows
# from each array's dtype, rank, layout and write flag and the function's signature, so it
# is computed once per such key.
_DENSITY_TARGET_TYPES: dict = {}


def _array_key(a) -> tuple | None:
    if type(a) is not np.ndarray:
        return None
    flags = a.flags
    return (
        a.dtype, a.dtype.isalignedstruct, a.ndim, flags.c_contiguous, flags.f_contiguous,
        flags.writeable,
    )  # fmt: skip


@typeof_impl.register(DensityTarget)
def _typeof_density_target(val, c):
    keys = tuple(_array_key(a) for a in val[: len(KernelTarget._fields)]) + tuple(
        _array_key(a) for a in val.target
    )
    if None in keys or not isinstance(val.density, CompiledKernel):
        return types.BaseTuple.from_types([typeof_impl(v, c) for v in val], type(val))
    key = (keys, val.density.signature())
    ty = _DENSITY_TARGET_TYPES.get(key)
    if ty is None:
        ty = types.BaseTuple.from_types([typeof_impl(v, c) for v in val], type(val))
        _DENSITY_TARGET_TYPES[key] = ty
    return ty


def log_density(q, tgt: DensityTarget, ws, grad, stats, with_grad: bool) -> float:
    """:func:`density` called from Python: the kernel of ``tgt.density`` at ``q``, with
    :func:`logp_grad`'s parameters and result (the chain driver's evaluations)."""
    return tgt.density.dispatcher()(q, tgt.target, ws, grad, stats, with_grad)


def plain_target(tgt: DensityTarget) -> KernelTarget:
    """The :data:`KernelTarget` of a :data:`DensityTarget` (the same arrays), for calling
    the kernels that take one from Python."""
    return tgt.target


@njit(cache=True, nogil=True, error_model="numpy")
def logp_grad_batch(thetas, tgt, ws, out_logp, out_grads, out_stats):
    """The log density of a :data:`DensityTarget` (:func:`density`) at many parameter
    vectors, serially and without the GIL.

    Callers split the rows of ``thetas`` over the shared thread pool
    (:func:`skbnn.utils.thread_map`), each thread with its own ``ws`` and slices of the
    outputs. ``tgt.tau`` is written when the noise is part of ``theta``; such targets need
    one ``tau`` per thread.
    """
    with_grad = out_grads.shape[0] > 0
    dummy = np.empty(0)
    for s in range(thetas.shape[0]):
        g = out_grads[s] if with_grad else dummy
        out_logp[s] = density(thetas[s], tgt, ws, g, out_stats[s], with_grad)


@njit(cache=True, nogil=True, error_model="numpy")
def forward_batch(thetas, XT, sizes, offsets, act, n, out):
    """Network outputs of many parameter vectors: ``out[s]`` has shape ``(k, n)``.

    Serial and GIL-free: prediction splits the draws over a thread pool instead of
    ``prange``, because a parallel loop here costs seconds of extra compilation on every
    new install and buys nothing over threads on disjoint slices of ``out``.
    :func:`forward_batch_for` compiles it for one activation.
    """
    _forward_batch(thetas, XT, sizes, offsets, act, n, out)


@functools.cache
def forward_batch_for(activation: int) -> numba.core.registry.CPUDispatcher:
    """:func:`forward_batch` compiled for one activation code, without its ``act``
    parameter: ``(thetas, XT, sizes, offsets, n, out)``. It shares the network kernels that
    :func:`logp_grad_for` compiles for that activation, and the process that compiles the
    network kernel beside a cold fit compiles it too (:func:`compile_aside`)."""
    activation = int(activation)

    def kernel(thetas, XT, sizes, offsets, n, out):
        _forward_batch(thetas, XT, sizes, offsets, activation, n, out)

    return njit(cache=True, nogil=True, error_model="numpy")(
        _named(kernel, f"forward_batch_{activation}")
    )


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def _forward_batch(thetas, XT, sizes, offsets, act, n, out):
    size = workspace_size(sizes, n)
    k = sizes[sizes.shape[0] - 1]
    ws = np.empty(size)
    for s in range(thetas.shape[0]):
        base = forward(thetas[s], XT, sizes, offsets, act, n, ws)
        for o in range(k):
            for t in range(n):
                out[s, o, t] = ws[base + o * n + t]
