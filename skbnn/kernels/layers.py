"""The network's forward pass: dense layers and activations.

The workspace ``ws`` holds the activations of every layer, feature-major (see
:mod:`skbnn.kernels.density`), followed by two delta buffers that the backward pass
(:mod:`skbnn.kernels.backprop`) uses.
"""

from numba.extending import overload

from ._compile import _FM, _OVERLOAD, _dispatch, njit
from ._libm import _logistic, _tanh
from .gemm import dense_blas, wide


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _dense(src, src_base, n_in, theta, w_start, b_start, dst, dst_base, n_out, n):
    # dst[j, :] = b[j] + sum_i W[i, j] src[i, :]. Two outputs per pass over the rows. The
    # r = n_in % 4 inputs that do not fill a group of four come first, one per pass, the
    # first of them in the pass that writes the biases (with none, that pass adds input 0
    # at weight 0); then four inputs per pass: each loaded src value feeds two FMAs, each
    # dst row is read and written once per four inputs, and the eight weights stay in
    # registers. An odd last output goes alone, in the same passes. Each pass writes both
    # dst rows, and the stores, not the FMAs, bound the passes of one input: a pass of its
    # own for the biases cost as much as one more input. A wide layer is one matrix product.
    if wide(n_in, n_out):
        dense_blas(src, src_base, n_in, theta, w_start, b_start, dst, dst_base, n_out, n)
        return
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
    # negatives with a masked store, which some CPUs microcode and run far slower
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
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's run-time branching
    _activation_pass_overload(z, act)(z, act)


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
