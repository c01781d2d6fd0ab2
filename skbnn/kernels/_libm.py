"""Elementary functions for the kernels, in plain arithmetic: exp, log, log1p, tanh and the
logistic function.

``math.exp``, ``math.log`` and ``math.tanh`` are opaque libm calls that keep the loops
around them scalar; these vectorize. Each is accurate to a few ulp (tests/test_kernels.py).
"""

import math

import numpy as np

from ._compile import njit

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
    # Horner's 50, which let too few elements overlap in the vectorized loops
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
    # masked store, which some CPUs microcode and run far slower.)
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
