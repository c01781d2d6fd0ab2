"""The network's log density and its gradient, assembled from its parts (:mod:`.layers`,
:mod:`.backprop`, :mod:`.likelihoods`, :mod:`.priors`), and the data contracts every kernel
takes; batch evaluations over many parameter vectors.

All arrays are flat and feature-major: ``XT`` is ``X.T`` raveled (``d * n``), so the innermost
loops run over rows with unit stride and vectorize. The kernels take the target as one
:data:`KernelTarget` named tuple (built by :meth:`skbnn.log_posterior.LogPosterior.kernel_target`)::

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
``activation``      code from :data:`skbnn.layout.ACTIVATIONS`
``likelihood``      code from :data:`skbnn.layout.LIKELIHOODS`
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
``noise_df``        above 0: the heteroscedastic likelihood's noise is a Student-t of this
                    many degrees of freedom (0: Gaussian)
==================  =====================================================================

The workspace ``ws`` holds the activations of every layer followed by two delta buffers
(:func:`workspace_size`).
"""

import functools
import math
import weakref
from collections import namedtuple

import numba
import numpy as np
from numba.core import types
from numba.extending import typeof_impl

from ._compile import (
    _FM,
    CompiledKernel,
    _named,
    compile_aside,
    compile_aside_enabled,
    compiled_kernel,
    njit,
    record,
    wait_for_helpers,
)
from ._libm import _LOG_2PI
from .backprop import _backward
from .layers import forward
from .likelihoods import _loglik_delta
from .priors import _noise_terms, log_prior

KernelTarget = namedtuple(
    "KernelTarget",
    ["XT", "YT", "W", "sizes", "offsets", "prior_mean", "prior_scale", "tau", "cfg"],
)

#: A :data:`KernelTarget`'s fields and two more: ``target``, that :data:`KernelTarget` itself
#: (the same arrays), and ``density``, :func:`logp_grad` compiled for its types and called
#: through its address (:func:`density_target`). The samplers' and the training engine's
#: kernels take this one and evaluate the log density with :func:`density`.
DensityTarget = namedtuple("DensityTarget", KernelTarget._fields + ("target", "density"))

CONFIG = record(
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
        ("noise_df", np.float64),
        ("min_var", np.float64),
    ],
    align=True,
)


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
    # for those constants only (see _compile.LITERAL_PARAMETERS)
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
    before typing them, and a cold compile of the network kernel types and optimizes only
    its own network's code. The kernels are cached on disk per combination, like any
    other.

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


def density_source(codes: tuple[int, int, int] | None) -> tuple:
    """The :class:`CompiledKernel` source of a :data:`DensityTarget`'s ``density``:
    :func:`logp_grad_for` the activation, likelihood and prior ``codes``
    (:func:`target_codes`), or :func:`logp_grad`, which reads them at run time, for None."""
    if codes is None:
        return (__name__, "logp_grad", None)
    return (__name__, "logp_grad_for", tuple(int(c) for c in codes))


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
# density) in Python, field by field, on every call of a kernel from Python, most of it the
# settings' record dtype: a hundred times a KernelTarget's typing. The type follows
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
    # A kernel called from Python in a loop (an epoch's, a block of draws') types its
    # DensityTarget on every call: the keys below took most of a small epoch's time. A
    # tuple's fields never change, so its type is kept on its density (which the tuples
    # of one signature share) by the tuple's id, with weak references to its arrays: a
    # new tuple at a freed one's id is typed again unless it holds the very same arrays.
    density = val.density
    types_by_id = getattr(density, "target_types", None)
    arrays = (*val[: len(KernelTarget._fields)], *val.target)
    if types_by_id is None or any(type(a) is not np.ndarray for a in arrays):
        return _type_by_key(val, c)
    kept = types_by_id.get(id(val))
    if kept is not None and all(r() is a for r, a in zip(kept[1], arrays, strict=True)):
        return kept[0]
    ty = _type_by_key(val, c)
    if len(types_by_id) >= _TYPES_KEPT:
        types_by_id.clear()
    types_by_id[id(val)] = (ty, tuple(weakref.ref(a) for a in arrays))
    return ty


#: how many tuples' types a density keeps (its fit's chains or members, each one's own)
_TYPES_KEPT = 64


def _type_by_key(val, c):
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


def forward_batch_for(activation: int) -> numba.core.registry.CPUDispatcher:
    """:func:`forward_batch` compiled for one activation code (:func:`forward_batch_kernel`),
    for prediction: if a helper process of :func:`~skbnn.kernels._compile.compile_aside` may
    be compiling it into the cache, and this process has not compiled it yet, this waits
    for that helper rather than compile it a second time."""
    kernel = forward_batch_kernel(activation)
    wait_for_helpers(kernel)
    return kernel


@functools.cache
def forward_batch_kernel(activation: int) -> numba.core.registry.CPUDispatcher:
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
