"""Microcanonical (isokinetic) transitions: MCLMC's step and MAMS's trajectory.

The velocity ``u`` has unit norm and lives in the coordinates the diagonal metric makes
roughly isotropic: with ``scale = sqrt(inv_m)``, the position moves by ``eps * scale * u``
and the velocity sees the gradient ``scale * g``. In those coordinates the isokinetic
(energy-sampling Hamiltonian) dynamics of ``d`` parameters is
``du/dt = (I - u u^T) g / (d - 1)``, ``dx/dt = u``, whose marginal in ``x`` is the target
when ``u`` is uniform on the sphere (Robnik et al. 2023). For a constant gradient the
velocity equation has a closed form, so the velocity update is exact and the only
discretization error is the splitting of the position and velocity updates. The kinetic
energy change ``(d - 1) log(...)`` of that update is the log-Jacobian of the flow; the
energy error of a step (or trajectory) is that change minus the log density's change, and
plays the role of the Hamiltonian's error in HMC: MAMS accepts by it, MCLMC tunes its step
size by its variance.

The functions here follow :mod:`skbnn.kernels.transitions`: they read the chain's point,
gradient and log density from its :data:`~skbnn.kernels.chain.Chain` and return a
:data:`~skbnn.kernels.transitions.TransitionInfo`, whose ``energy`` is the energy error
here (not the Hamiltonian, which an isokinetic velocity does not have).
"""

import math

import numpy as np

from ._compile import njit
from .integrators import logp_and_grad
from .linalg import copy, dot
from .transitions import TransitionInfo

#: Kinds of integrator: leapfrog (velocity, position, velocity: one gradient per step) and
#: McLachlan's minimal-norm scheme (velocity b1, position 1/2, velocity 1 - 2 b1, position
#: 1/2, velocity b1: two gradients per step, about ten times smaller energy error at a
#: given step size; BlackJAX's default for both samplers)
LEAPFROG, MCLACHLAN = 0, 1
#: McLachlan's (1995) minimal-norm coefficient of the outer velocity updates
_B1 = 0.1931833275037836
_LOG2 = math.log(2.0)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def normalize(u):
    """``u / |u|`` in place; returns ``|u|``."""
    norm = math.sqrt(dot(u, u))
    for i in range(u.shape[0]):
        u[i] /= norm
    return norm


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def random_direction(rng, u):
    """A uniform draw on the unit sphere, into ``u``."""
    for i in range(u.shape[0]):
        u[i] = rng.standard_normal()
    normalize(u)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def velocity_update(u, g, scale, eps, tmp):
    """The isokinetic velocity update of time ``eps`` under the constant gradient ``g``, in
    place; returns the kinetic energy change (the flow's log-Jacobian).

    With ``e`` the unit preconditioned gradient, ``delta = eps |scale g| / (d - 1)`` and
    ``zeta = exp(-delta)``, the exact solution is ``u' ~ e (1 - zeta) (1 + zeta + u.e
    (1 - zeta)) + 2 zeta u`` (normalized), and the kinetic energy changes by ``(d - 1)
    (delta - log 2 + log(1 + u.e + (1 - u.e) zeta^2))``. A non-finite gradient makes both
    non-finite, which the callers count as a divergence.
    """
    d = u.shape[0]
    norm2 = 0.0
    for i in range(d):
        tmp[i] = scale[i] * g[i]
        norm2 += tmp[i] * tmp[i]
    g_norm = math.sqrt(norm2)
    if g_norm == 0.0:
        # no force: the velocity keeps its direction and the kinetic energy its value
        return 0.0
    proj = dot(u, tmp) / g_norm
    delta = eps * g_norm / (d - 1)
    zeta = math.exp(-delta)
    a = (1.0 - zeta) * (1.0 + zeta + proj * (1.0 - zeta)) / g_norm
    b = 2.0 * zeta
    for i in range(d):
        u[i] = a * tmp[i] + b * u[i]
    normalize(u)
    return (d - 1) * (delta - _LOG2 + math.log(1.0 + proj + (1.0 - proj) * zeta * zeta))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _drift(q, u, scale, eps):
    for i in range(q.shape[0]):
        q[i] += eps * scale[i] * u[i]


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def isokinetic_step(q, u, g, eps, scale, integrator, tmp, tgt, ws, st):
    """One step of size ``eps`` of the isokinetic dynamics from ``(q, u)`` with gradient
    ``g``, in place (``st`` receives the new point's log-density terms).

    Returns the new log density, the kinetic energy change and the gradients evaluated.
    """
    if integrator == MCLACHLAN:
        dk = velocity_update(u, g, scale, _B1 * eps, tmp)
        _drift(q, u, scale, 0.5 * eps)
        logp_and_grad(q, tgt, ws, g, st)
        dk += velocity_update(u, g, scale, (1.0 - 2.0 * _B1) * eps, tmp)
        _drift(q, u, scale, 0.5 * eps)
        lp = logp_and_grad(q, tgt, ws, g, st)
        dk += velocity_update(u, g, scale, _B1 * eps, tmp)
        return lp, dk, 2
    dk = velocity_update(u, g, scale, 0.5 * eps, tmp)
    _drift(q, u, scale, eps)
    lp = logp_and_grad(q, tgt, ws, g, st)
    dk += velocity_update(u, g, scale, 0.5 * eps, tmp)
    return lp, dk, 1


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def partial_refresh(rng, u, eps, path_length):
    """Langevin noise on the velocity after a step of size ``eps``: ``u <- (c u + sqrt(1 -
    c^2) z / sqrt(d)) / |...|`` with ``c = exp(-eps / L)`` and ``z ~ N(0, I)``, so the
    velocity decorrelates over a distance ``L = path_length`` (Robnik & Seljak 2024)."""
    d = u.shape[0]
    c = math.exp(-eps / path_length)
    nu = math.sqrt(max(1.0 - c * c, 0.0) / d)
    for i in range(d):
        u[i] = c * u[i] + nu * rng.standard_normal()
    normalize(u)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def mclmc(rng, chain, tgt, settings, work, u, scale, path_length):
    """One MCLMC step: an isokinetic step of the chain's step size, then the partial
    velocity refresh of decoherence length ``path_length``. Unadjusted: the step is kept
    unless it diverged, its end not finite or its energy error beyond
    ``max_delta_energy`` (BlackJAX undoes the non-finite ones; an error of 1000 is many
    standard deviations past any tuned step's, and a step that far off has left the
    posterior), in which case the chain stays where it was. ``u`` (the persistent
    velocity) is updated in place.

    ``accept_stat`` reports the squared energy error per parameter (its mean over the
    steps is the energy error variance per dimension the step size is tuned to) and 0 for
    a divergent step; ``energy`` the energy error itself (NaN when not finite).
    """
    q0, g0, st0 = chain.q, chain.grad, chain.stats
    lp0 = chain.state[0].logp
    eps = chain.state[0].step_size
    conf = settings[0]
    st, buf = work.stats, work.vecs
    q, g, u_new, tmp = buf[0], buf[2], buf[1], buf[21]
    d = q0.shape[0]
    copy(q, q0)
    copy(g, g0)
    copy(u_new, u)
    lp, dk, n_grads = isokinetic_step(
        q, u_new, g, eps, scale, conf.integrator, tmp, tgt, work.net, st
    )
    de = dk - (lp - lp0)
    finite = math.isfinite(lp) and math.isfinite(de)
    if finite:
        finite = math.isfinite(dot(q, q)) and math.isfinite(dot(u_new, u_new))
    if not finite:
        de = np.nan
    divergent = not finite or abs(de) > conf.max_delta_energy
    lp_out = lp0
    if not divergent:
        copy(q0, q)
        copy(g0, g)
        copy(st0, st)
        copy(u, u_new)
        lp_out = lp
    partial_refresh(rng, u, eps, path_length)
    sq = 0.0 if divergent else de * de / d
    return TransitionInfo(lp_out, 1, n_grads, sq, divergent, de)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def jittered_steps(rng, mean):
    """A random number of steps with mean ``mean``: ``ceil(U s)`` for ``U`` uniform, with
    ``s`` solving ``E[ceil(U s)] = mean`` (for an integer ``m`` it is uniform on ``1 ..
    2m - 1``). Lengths drawn independently of the state keep each trajectory reversible,
    and their spread breaks the periodic orbits a fixed length can lock into."""
    if not mean > 1.0:
        # mean <= 1, or NaN (a step size that overflowed): one step
        return 1
    k = math.floor(2.0 * mean - 1.0)
    # E[ceil(U s)] = (k + 1) - k (k + 1) / (2 s) for k <= s <= k + 1
    s = k * (k + 1.0) / (2.0 * (k + 1.0 - mean))
    return max(1, int(math.ceil(rng.random() * s)))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def mams(rng, chain, tgt, settings, work, scale):
    """One MAMS transition (Robnik et al. 2025): a velocity drawn uniformly on the sphere,
    a jittered number of isokinetic steps with mean ``L / eps`` (``L = path_length *
    sqrt(d)``, at most ``max_steps``), and a Metropolis test of the end point with
    probability ``min(1, exp(-energy error))``, whose kinetic part is the flow's
    log-Jacobian, so the chain is exact. A trajectory whose log density stops being finite
    ends there and is rejected; an energy error above ``max_delta_energy`` is divergent.
    """
    q0, g0, st0 = chain.q, chain.grad, chain.stats
    lp0 = chain.state[0].logp
    conf = settings[0]
    st, buf = work.stats, work.vecs
    q, g, u, tmp = buf[0], buf[2], buf[1], buf[21]
    d = q0.shape[0]
    path = conf.path_length * math.sqrt(d)
    # BlackJAX's cap: at least 1.1 steps per trajectory on average
    eps = min(chain.state[0].step_size, path / 1.1)
    n_steps = min(conf.max_steps, jittered_steps(rng, path / eps))
    random_direction(rng, u)
    copy(q, q0)
    copy(g, g0)
    lp = lp0
    dk = 0.0
    n_grads = 0
    for _ in range(n_steps):
        lp, dk_step, n = isokinetic_step(
            q, u, g, eps, scale, conf.integrator, tmp, tgt, work.net, st
        )
        dk += dk_step
        n_grads += n
        if not math.isfinite(lp):
            break
    de = dk - (lp - lp0)
    if not de == de:
        de = np.inf
    acc = 1.0 if de <= 0.0 else math.exp(-de)
    divergent = de > conf.max_delta_energy
    if rng.random() < acc:
        copy(q0, q)
        copy(g0, g)
        copy(st0, st)
        return TransitionInfo(lp, n_steps, n_grads, acc, divergent, de)
    return TransitionInfo(lp0, n_steps, n_grads, acc, divergent, de)


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def integrated_autocorrelation_time(draws, n, col):
    """Geyer's initial monotone sequence estimate of the integrated autocorrelation time of
    column ``col`` of ``draws[:n]`` (one chain), at least ``1 / log10(n)`` as Stan bounds
    it; NaN for a constant column."""
    mean = 0.0
    for t in range(n):
        mean += draws[t, col]
    mean /= n
    c0 = 0.0
    for t in range(n):
        x = draws[t, col] - mean
        c0 += x * x
    if not c0 > 0.0:
        return np.nan
    tau = -1.0
    prev = np.inf
    lag = 0
    while lag + 1 < n:
        pair = 0.0
        for k in range(lag, lag + 2):
            acc = 0.0
            for t in range(n - k):
                acc += (draws[t, col] - mean) * (draws[t + k, col] - mean)
            pair += acc / c0
        if pair <= 0.0:
            break
        pair = min(pair, prev)
        tau += 2.0 * pair
        prev = pair
        lag += 2
    return max(tau, 1.0 / math.log10(max(n, 2)))


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def mean_autocorrelation_time(draws, n):
    """The mean over columns of :func:`integrated_autocorrelation_time` of ``draws[:n]``
    (constant columns left out; NaN when all are)."""
    total = 0.0
    count = 0
    for col in range(draws.shape[1]):
        tau = integrated_autocorrelation_time(draws, n, col)
        if math.isfinite(tau):
            total += tau
            count += 1
    return total / count if count > 0 else np.nan
