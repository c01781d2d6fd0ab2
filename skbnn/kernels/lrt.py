"""The local reparameterization trick (Kingma et al. 2015) for Gaussian weights.

Where every weight of a dense layer is an independent Gaussian, ``N(mu, var)``, each
pre-activation of a row is a Gaussian too, ``N(a mu_W + mu_b, a^2 var_W + var_b)`` given
the layer's input ``a``: drawing it per row is the same as an independent draw of the
weights for every row, for the arithmetic of two dense passes. The variational families of
:mod:`skbnn.kernels.vi` and :mod:`skbnn.kernels.flows` pass their weights' means and
variances (for the spike and slab, those of the mixture) through these kernels.

A wide layer (:func:`skbnn.kernels.gemm.wide`, by its shape alone) runs its products
through BLAS as the network kernels do: the mean and variance passes and the two weight
gradients through :mod:`.layers` and :mod:`.backprop`, which choose it themselves, and the
delta of the layer below, ``delta mu_W^T + 2 a (dv var_W^T)``, as two ``dgemm`` calls here.
"""

import functools
import math

import numba
import numpy as np
from numba.core import types
from numba.extending import overload

from ._compile import _FM, _OVERLOAD, CompiledKernel, _named, compiled_kernel, njit
from .backprop import _wgrad
from .gemm import gemm, wide
from .layers import _activate, _dense


@njit(cache=True, nogil=True, error_model="numpy")
def lrt_workspace_size(sizes, n):
    """Length of the scratch buffer the local-reparameterization pass needs for ``n``
    rows: the squared inputs of every layer, every layer's activations and noise terms,
    a variance buffer and three delta buffers of the widest layer."""
    total = 0
    widest = 0
    for layer in range(sizes.shape[0] - 1):
        total += sizes[layer] + 2 * sizes[layer + 1]
        widest = max(widest, sizes[layer + 1])
    return (total + 4 * widest) * n


@njit(cache=True, nogil=True, error_model="numpy", from_python=False)
def _bases(sizes, n):
    # starts in ws of: the squared input of each layer, each layer's output (activations),
    # each layer's xi / (2 sd), then the variance buffer and the three delta buffers
    n_layers = sizes.shape[0] - 1
    sq = np.empty(n_layers, np.int64)
    out = np.empty(n_layers, np.int64)
    kb = np.empty(n_layers, np.int64)
    pos = 0
    widest = 0
    for layer in range(n_layers):
        sq[layer] = pos
        pos += sizes[layer] * n
    for layer in range(n_layers):
        out[layer] = pos
        pos += sizes[layer + 1] * n
        widest = max(widest, sizes[layer + 1])
    for layer in range(n_layers):
        kb[layer] = pos
        pos += sizes[layer + 1] * n
    return sq, out, kb, pos, widest * n


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def lrt_forward(mu, var, XT, sizes, offsets, act, n, ws, rng):
    """The network on ``n`` feature-major rows with every layer's pre-activations drawn
    per row from ``N(a mu_W + mu_b, a^2 var_W + var_b)``; returns the output's offset in
    ``ws``. Keeps what :func:`lrt_backward` needs."""
    n_layers = sizes.shape[0] - 1
    sq, out, kb, vbuf, _ = _bases(sizes, n)
    d = sizes[0]
    x2 = ws[sq[0] : sq[0] + d * n]
    for t in range(d * n):
        x2[t] = XT[t] * XT[t]
    for layer in range(n_layers):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        b_start = w_start + n_in * n_out
        if layer == 0:
            _dense(XT, 0, n_in, mu, w_start, b_start, ws, out[0], n_out, n)
        else:
            _dense(ws, out[layer - 1], n_in, mu, w_start, b_start, ws, out[layer], n_out, n)
        _dense(ws, sq[layer], n_in, var, w_start, b_start, ws, vbuf, n_out, n)
        m = ws[out[layer] : out[layer] + n_out * n]
        v = ws[vbuf : vbuf + n_out * n]
        k = ws[kb[layer] : kb[layer] + n_out * n]
        for t in range(n_out * n):
            xi = rng.standard_normal()
            sd = math.sqrt(v[t])
            m[t] += sd * xi
            # d z / d v = xi / (2 sd); a variance that underflowed to 0 stays there
            k[t] = 0.5 * xi / sd if sd > 0.0 else 0.0
        if layer < n_layers - 1:
            _activate(ws, out[layer], n_out * n, act)
            a2 = ws[sq[layer + 1] : sq[layer + 1] + n_out * n]
            for t in range(n_out * n):
                a2[t] = m[t] * m[t]
    return out[n_layers - 1]


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def lrt_backward(mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta):
    """Backpropagate the output delta (in the first delta buffer) of :func:`lrt_forward`
    into ``gmu`` (the means) and ``gvar`` (the variances), scaled by ``beta``."""
    n_layers = sizes.shape[0] - 1
    sq, out, kb, vbuf, wn = _bases(sizes, n)
    cur = vbuf + wn
    nxt = cur + wn
    dvb = nxt + wn
    for layer in range(n_layers - 1, -1, -1):
        n_in = sizes[layer]
        n_out = sizes[layer + 1]
        w_start = offsets[layer]
        b_start = w_start + n_in * n_out
        delta = ws[cur : cur + n_out * n]
        dv = ws[dvb : dvb + n_out * n]
        k = ws[kb[layer] : kb[layer] + n_out * n]
        for t in range(n_out * n):
            dv[t] = delta[t] * k[t]
        x2 = ws[sq[layer] : sq[layer] + n_in * n]
        if layer == 0:
            _wgrad(XT, n_in, delta, n_out, n, gmu, w_start, b_start, beta)
            _wgrad(x2, n_in, dv, n_out, n, gvar, w_start, b_start, beta)
            break
        a_all = ws[out[layer - 1] : out[layer - 1] + n_in * n]
        _wgrad(a_all, n_in, delta, n_out, n, gmu, w_start, b_start, beta)
        _wgrad(x2, n_in, dv, n_out, n, gvar, w_start, b_start, beta)
        # d z_j / d a_i = mu_W[i, j] + 2 a_i var_W[i, j] (d z_j / d v_j)
        if wide(n_in, n_out):
            # the variance term first, so that a multiplies it alone before the mean's
            # product adds into the same buffer (beta = 1): no second buffer of n_in rows
            gemm(0, 0, n, n_in, n_out, 2.0, dv, 0, n, var, w_start, n_out, 0.0, ws, nxt, n,
                 n_in * n_out)  # fmt: skip
            nd = ws[nxt : nxt + n_in * n]
            for t in range(n_in * n):
                nd[t] *= a_all[t]
            gemm(0, 0, n, n_in, n_out, 1.0, delta, 0, n, mu, w_start, n_out, 1.0, ws, nxt, n,
                 n_in * n_out)  # fmt: skip
            _times_derivative(nd, a_all, act)
        else:
            for i in range(n_in):
                nd = ws[nxt + i * n : nxt + (i + 1) * n]
                a = a_all[i * n : (i + 1) * n]
                for t in range(n):
                    nd[t] = 0.0
                for j in range(n_out):
                    wm = mu[w_start + i * n_out + j]
                    w2 = 2.0 * var[w_start + i * n_out + j]
                    d = delta[j * n : (j + 1) * n]
                    e = dv[j * n : (j + 1) * n]
                    for t in range(n):
                        nd[t] += wm * d[t] + w2 * a[t] * e[t]
                _times_derivative(nd, a, act)
        cur, nxt = nxt, cur


@functools.cache
def lrt_backward_for(activation: int) -> numba.core.registry.CPUDispatcher:
    """:func:`lrt_backward` compiled for one activation: a kernel with its parameters but
    ``act``, which other kernels can take by address (:func:`lrt_backward_kernel`)."""
    act = int(activation)

    def kernel(mu, var, XT, sizes, offsets, n, ws, gmu, gvar, beta):
        lrt_backward(mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta)

    return njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM)(
        _named(kernel, f"lrt_backward_{act}")
    )


_VECTOR = types.Array(types.float64, 1, "C")


def lrt_backward_kernel(activation: int, sizes: np.ndarray) -> CompiledKernel:
    """:func:`lrt_backward_for` ``activation`` as a
    :class:`~skbnn.kernels._compile.CompiledKernel` for float64 C vectors and the index
    arrays' type of ``sizes`` (a target's ``sizes`` and ``offsets``): an epoch kernel that
    takes it (:func:`skbnn.kernels.vi.run_vi_epoch_for`) compiles without the backward
    pass's code, which a fit's helper process compiles meanwhile
    (:func:`~skbnn.kernels._compile.compile_aside`)."""
    index = numba.typeof(sizes)
    sig = types.void(_VECTOR, _VECTOR, _VECTOR, index, index, types.int64, _VECTOR, _VECTOR,
                     _VECTOR, types.float64)  # fmt: skip
    return compiled_kernel(sig, (__name__, "lrt_backward_for", (int(activation),)))


def backward_pass(backward, mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta):
    """:func:`lrt_backward`, through ``backward`` (:func:`lrt_backward_kernel`'s, by
    address) unless it is None (compiled by its overload)."""
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's choice
    args = (backward, mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta)
    _backward_pass_overload(*args)(*args)


@overload(backward_pass, **_OVERLOAD)
def _backward_pass_overload(backward, mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta):
    if backward is None or isinstance(backward, types.NoneType):

        def linked(backward, mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta):
            lrt_backward(mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta)

        return linked

    def by_address(backward, mu, var, XT, sizes, offsets, act, n, ws, gmu, gvar, beta):
        backward(mu, var, XT, sizes, offsets, n, ws, gmu, gvar, beta)

    return by_address


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, inline="always")
def _times_derivative(nd, a, act):
    # nd times the activation's derivative at its output a: ReLU's 0/1 mask, tanh's
    # 1 - a^2, the logistic's a (1 - a); the identity's 1 leaves nd as it is
    if act == 1:
        for t in range(nd.shape[0]):
            nd[t] *= 1.0 if a[t] > 0.0 else 0.0
    elif act == 2:
        for t in range(nd.shape[0]):
            nd[t] *= 1.0 - a[t] * a[t]
    elif act == 3:
        for t in range(nd.shape[0]):
            nd[t] *= a[t] * (1.0 - a[t])
