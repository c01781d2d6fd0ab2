"""Log-likelihood terms of the network's outputs and their output deltas: Gaussian (with
known, sampled or marginalized noise), heteroscedastic Gaussian or Student-t, Bernoulli and
categorical.

The heteroscedastic likelihood reads ``2 m`` network outputs for ``m`` targets: the
means, then raw variances mapped through ``softplus(f) + v0`` (as in Lakshminarayanan et
al. 2017), where ``v0`` (``cfg.min_var``) is ``HETERO_MIN_VAR``, or the variance of
rounding to the grid the targets lie on (:func:`skbnn._data.rounding_variance`). With
``cfg.noise_df`` above zero, each row's noise is a Student-t of that many
degrees of freedom whose squared scale is that variance.
"""

import math

from numba.extending import overload

from ._compile import _FM, _OVERLOAD, _dispatch, njit
from ._libm import _FM_EXACT, _LOG_2PI, _exp_neg, _log, _log1p_unit

# floor of the heteroscedastic likelihood's variance, as in Lakshminarayanan et al. (2017),
# for targets on no grid
HETERO_MIN_VAR = 1e-6


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
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's run-time branching
    args = (ws, out_base, YT, w, sw, tau, k, n, delta, delta_base, stats, cfg, marg, lik)
    return _loglik_terms_overload(*args)(*args)


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
    nu = cfg.noise_df
    student = nu > 0.0
    floor = cfg.min_var
    # the Student-t's normalizing constant, per unit of row weight
    t_const = 0.0
    if student:
        t_const = (math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu)
                   - 0.5 * math.log(nu * math.pi))  # fmt: skip
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
        if student:
            for t in range(n):
                f = raw[t]
                e = dv[t]
                var = (f if f >= 0.0 else 0.0) + _log1p_unit(e) + floor
                r = y[t] - mu[t]
                wt = w[t]
                ssr += wt * r * r
                # log t = c - log(var) / 2 - (nu + 1) / 2 log(1 + r^2 / (nu var)), written
                # with q = nu var + r^2 so that its derivatives share one division
                q = nu * var + r * r
                ll += wt * (t_const - 0.5 * _log(var) - 0.5 * (nu + 1.0) * _log(q / (nu * var)))
                dm[t] = wt * (nu + 1.0) * r / q
                sig = 1.0 / (1.0 + e) if f >= 0.0 else e / (1.0 + e)
                dv[t] = 0.5 * wt / var * ((nu + 1.0) * r * r / q - 1.0) * sig
        else:
            for t in range(n):
                f = raw[t]
                e = dv[t]
                var = (f if f >= 0.0 else 0.0) + _log1p_unit(e) + floor
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
        # second view of it fails LLVM's run-time overlap check and runs scalar.
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
