"""The network's backward pass: the blocked weight gradient, backpropagation of the output
deltas, and the Jacobian of the outputs in the parameters."""

from numba.extending import overload

from ._compile import _FM, _OVERLOAD, _dispatch, njit
from .cpu import _FOUR_BY_FOUR
from .gemm import delta_blas, wgrad_blas, wide
from .layers import forward


@njit(cache=True, nogil=True, error_model="numpy", fastmath=_FM, from_python=False)
def _wgrad(src, n_in, delta, n_out, n, grad, w_start, b_start, beta):
    # grad[W[i, j]] += beta * src[i, :] . delta[j, :] and grad[b[j]] += beta * sum(delta[j, :]).
    # Four outputs and four inputs per pass over the rows where the CPU has the registers
    # (_FOUR_BY_FOUR, AVX-512): eight loads feed sixteen FMAs into sixteen independent sums,
    # where two outputs' passes are bound by their loads (six for eight FMAs). The outputs
    # that do not fill a four (all of them without AVX-512) go by two, a last odd one
    # paired with itself (its sums twice, one of them dropped): a pass of its own for one
    # output would add to the compile of every network kernel. A wide layer is one matrix
    # product.
    if wide(n_in, n_out):
        wgrad_blas(src, n_in, delta, n_out, n, grad, w_start, b_start, beta)
        return
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
    if wide(n_in, n_out):
        delta_blas(theta, ws, delta, nxt, in_base, n_in, n_out, w_start, n, c0, c1, c2, z)
        return
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
    # run only without numba's compiler (NUMBA_DISABLE_JIT): the overload's run-time branching
    _first_delta_pass_overload(nd, w0, d0, w1, d1, a, n, act)(nd, w0, d0, w1, d1, a, n, act)


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
        Feature-major rows and the network, as :func:`skbnn.kernels.layers.forward` takes them.
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
