"""Kronecker-factored curvature of a multilayer perceptron (K-FAC) and the Laplace
precision built from it.

For layer ``l`` with inputs ``a`` (``fan_in``) and pre-activations ``s = a W + b``
(``fan_out``), the Gauss-Newton matrix of the weights is ``sum_n a_n a_n^T (x) g_n^T
Lambda_n g_n``, ``g_n = d f / d s`` (outputs by ``fan_out``) and ``Lambda_n`` the
likelihood's Hessian in the outputs. K-FAC replaces the sum of Kronecker products by the
product of the sums, ``A (x) G`` with ``A`` the *mean* of ``a a^T`` and ``G`` the *sum* of
``g^T Lambda g`` (Martens & Grosse 2015); the bias block ``G`` is exact. Blocks of different
layers, and a layer's weights and bias, are independent. This is laplace-torch's
``KronLaplace`` (its exact ``"kflr"`` factors), in skbnn's parameter order: ``W_l`` is
``(fan_in, fan_out)`` row-major, so its block is ``A (x) G``.

Memory grows with the squares of the layers' widths, not with the square of the number of
parameters: a 20-100-100-1 network needs 3 x 100^2 numbers where its full Gauss-Newton
matrix needs 12,301^2.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax

from .layout import ACTIVATIONS

_ACTIVATION = {
    ACTIVATIONS["identity"]: lambda s: s,
    ACTIVATIONS["relu"]: lambda s: np.maximum(s, 0.0),
    ACTIVATIONS["tanh"]: np.tanh,
    ACTIVATIONS["logistic"]: lambda s: 0.5 * (1.0 + np.tanh(0.5 * s)),
}


#: each activation's derivative, from its input ``s`` and output ``a``
_DERIVATIVE = {
    ACTIVATIONS["identity"]: lambda s, a: np.ones_like(s),
    ACTIVATIONS["relu"]: lambda s, a: (s > 0.0).astype(s.dtype),
    ACTIVATIONS["tanh"]: lambda s, a: 1.0 - a * a,
    ACTIVATIONS["logistic"]: lambda s, a: a * (1.0 - a),
}


def _forward(layout, activation: int, theta, X):
    # every layer's inputs and pre-activations, and the weight matrices
    act = _ACTIVATION[int(activation)]
    W, b = layout.unpack(theta)
    inputs, pre = [X], []
    for layer in range(layout.n_layers):
        pre.append(inputs[-1] @ W[layer] + b[layer])
        if layer < layout.n_layers - 1:
            inputs.append(act(pre[-1]))
    return inputs, pre, W


def output_derivatives(layout, activation: int, theta, X, first_layer: int):
    """``(inputs, f, deltas)`` for the rows of ``X``: every layer's inputs, the network's
    outputs ``f`` (``(k, rows)``) and, per layer from ``first_layer`` on, ``d f / d s``
    (``(k, rows, fan_out)``, ``s`` the layer's pre-activations), by backpropagation in
    BLAS products. The Jacobian of output ``o`` in a layer's weights is the outer product
    of its input and ``deltas[o]``, in its bias ``deltas[o]`` itself: all that K-FAC and
    its linearized predictive need, at a ``fan_out / q`` fraction of the Jacobian's size.
    """
    inputs, pre, W = _forward(layout, activation, theta, X)
    deriv = _DERIVATIVE[int(activation)]
    k, n = int(layout.sizes[-1]), X.shape[0]
    delta = np.broadcast_to(np.eye(k)[:, None, :], (k, n, k))
    deltas = [None] * layout.n_layers
    for layer in range(layout.n_layers - 1, first_layer - 1, -1):
        deltas[layer] = delta
        if layer > first_layer:
            below = inputs[layer]
            delta = (delta @ W[layer].T) * deriv(pre[layer - 1], below)[None]
    return inputs, pre[-1].T, deltas[first_layer:]


class KronFactors:
    """The K-FAC factors of the likelihood's Gauss-Newton matrix, accumulated over rows.

    ``A[l]`` is the weighted mean of the layer's inputs' outer products; ``G[l]`` holds
    ``(n_blocks, fan_out, fan_out)`` sums of ``g^T Lambda g``: one per output of a Gaussian
    likelihood without its noise precision (which empirical Bayes changes; the combined
    factor is ``sum_o tau_o G[l][o]``), or one for the other likelihoods.

    Parameters
    ----------
    layout : skbnn.layout.NetworkLayout
    first_layer : int
        The first covered layer.
    n_blocks : int
    """

    def __init__(self, layout, first_layer: int, n_blocks: int):
        self.layout = layout
        self.first_layer = int(first_layer)
        sizes = layout.sizes
        self.layers = range(self.first_layer, layout.n_layers)
        self.A = [np.zeros((sizes[i], sizes[i])) for i in self.layers]
        self.G = [np.zeros((n_blocks, sizes[i + 1], sizes[i + 1])) for i in self.layers]
        self.weight_sum = 0.0

    def add(self, inputs: list, M: list, w: np.ndarray) -> None:
        """Add a chunk of rows: ``inputs[l]`` (rows by ``fan_in``), the row weights ``w``
        and, per covered layer, ``M[i]`` (``(n_blocks, c, rows, fan_out)``): the derivatives
        of the outputs in the layer's pre-activations multiplied by a square root of
        ``Lambda`` (``c`` columns of it per block)."""
        for i, layer in enumerate(self.layers):
            a = inputs[layer]
            self.A[i] += (a * w[:, None]).T @ a
            g = M[i]
            nb, c, m, fan_out = g.shape
            # sum over the rows and the columns of Lambda's root
            g = g.reshape(nb, c * m, fan_out)
            self.G[i] += np.matmul(g.transpose(0, 2, 1), g)
        self.weight_sum += float(np.sum(w))

    def __iadd__(self, other: KronFactors) -> KronFactors:
        for i in range(len(self.A)):
            self.A[i] += other.A[i]
            self.G[i] += other.G[i]
        self.weight_sum += other.weight_sum
        return self

    def finish(self) -> KronFactors:
        """Turn the sums of ``a a^T`` into their weighted mean (once every row is in)."""
        for a in self.A:
            a /= self.weight_sum
        return self


def likelihood_factors(target, net, theta, first_layer: int) -> KronFactors:
    """The K-FAC factors of ``target``'s likelihood at ``theta`` (a
    :class:`~skbnn.log_posterior.LogPosterior` and the
    :class:`~skbnn.posterior.ForwardPass` that runs its network), from the layers' inputs
    and the outputs' derivatives in their pre-activations, never the Jacobian. A Gaussian
    likelihood's outputs are blocks of their own, without the noise precision."""
    W, lik = target.W, target.likelihood
    n, d = target.n_rows, target.n_features
    X = target.XT.reshape(d, n).T
    n_blocks = target.n_outputs if lik == "gaussian" else 1

    def part(rows, f, inputs, deltas):
        w = W[rows]
        if lik == "gaussian":
            # one column of Lambda's root per output
            M = [d[:, None] * np.sqrt(w)[None, None, :, None] for d in deltas]
        elif lik == "bernoulli":
            p = expit(f[0])
            M = [(d * np.sqrt(w * p * (1.0 - p))[None, :, None])[None] for d in deltas]
        else:
            # diag(p) - p p^T = A A^T with A[o, j] = (delta_oj - p_o) sqrt(p_j): one block,
            # a column per class
            p = softmax(f, axis=0)
            A = (np.eye(len(p))[:, :, None] - p[:, None, :]) * np.sqrt(p * w)[None]
            M = [np.einsum("ojm,omr->jmr", A, d)[None] for d in deltas]
        factors = KronFactors(target.layout, first_layer, n_blocks)
        factors.add(inputs, M, w)
        return factors

    # summed in chunk order, a few chunks per thread at a time (the same bits for any
    # n_jobs): each chunk's factors are as large as the total's, and there can be
    # thousands of chunks
    total = net.map_derivatives(X, theta, first_layer, part, combine=KronFactors.__iadd__)
    return total.finish()


class KronPrecision:
    """A block-diagonal precision with Kronecker-factored blocks plus a prior precision.

    Layer ``l``'s weight block is ``A_l (x) G_l + delta_W I`` and its bias block
    ``G_l + delta_b I``, each held by the eigendecompositions of ``A_l`` and ``G_l``, so
    the log determinant, inverse, square roots and the diagonal of the inverse cost
    O(fan_in^3 + fan_out^3) per layer, never the square of the parameter count.

    Parameters
    ----------
    layout : skbnn.layout.NetworkLayout
    first_layer : int
    A : list of ndarray
        The input factors, ``(fan_in, fan_in)`` per covered layer.
    G : list of ndarray
        The output factors, ``(fan_out, fan_out)`` per covered layer.
    deltas : ndarray of shape (2 * n_covered_layers,)
        The prior precision of each group, ``[W_l, b_l, ...]``.
    """

    def __init__(self, layout, first_layer: int, A, G, deltas):
        self.layout = layout
        self.first_layer = int(first_layer)
        self.deltas = np.asarray(deltas, dtype=np.float64)
        self.start = int(layout.offsets[self.first_layer])
        self.n_params = int(layout.n_weights) - self.start
        self.groups = []
        for i, layer in enumerate(range(self.first_layer, layout.n_layers)):
            lam_a, q_a = _eigh(A[i])
            lam_g, q_g = _eigh(G[i])
            w, b = layout.slices(layer)
            shape = (int(layout.sizes[layer]), int(layout.sizes[layer + 1]))
            # eigenvalues of the weight block (fan_in, fan_out) and of the bias block
            eig_w = np.outer(lam_a, lam_g) + self.deltas[2 * i]
            eig_b = lam_g + self.deltas[2 * i + 1]
            self.groups.append(
                (self._local(w), self._local(b), shape, q_a, q_g, lam_a, lam_g, eig_w, eig_b)
            )

    def _local(self, s: slice) -> slice:
        return slice(s.start - self.start, s.stop - self.start)

    @property
    def ndim(self) -> int:
        """2: it stands for a square matrix (the callers test ``precision.ndim``)."""
        return 2

    def logdet(self) -> float:
        """``log det`` of the precision."""
        return float(sum(np.sum(np.log(g[7])) + np.sum(np.log(g[8])) for g in self.groups))

    def _apply(self, V: np.ndarray, power: float) -> np.ndarray:
        """``V @ P**power`` for rows ``V`` of shape ``(n, q)`` (``P`` is symmetric)."""
        n = V.shape[0]
        out = np.empty_like(V)
        if n == 0:
            return out
        for w, b, shape, q_a, q_g, _, _, eig_w, eig_b in self.groups:
            # per row, Q_A (D**power * (Q_A^T X Q_G)) Q_G^T in the block's eigenbasis
            z = _sandwich(q_a, V[:, w].reshape(n, *shape), q_g) * eig_w**power
            out[:, w] = _sandwich(q_a.T, z, q_g.T).reshape(n, -1)
            out[:, b] = ((V[:, b] @ q_g) * eig_b**power) @ q_g.T
        return out

    def solve(self, v: np.ndarray) -> np.ndarray:
        """``P^-1 v`` for a vector ``v``."""
        return self._apply(v[None], -1.0)[0]

    def matvec(self, v: np.ndarray) -> np.ndarray:
        """``P v`` for a vector ``v``."""
        return self._apply(v[None], 1.0)[0]

    def prior_diagonal(self) -> np.ndarray:
        """The prior's part of the precision: each group's delta, per parameter."""
        out = np.empty(self.n_params)
        for i, (w, b, *_) in enumerate(self.groups):
            out[w], out[b] = self.deltas[2 * i], self.deltas[2 * i + 1]
        return out

    def diag_inverse(self) -> np.ndarray:
        """The diagonal of ``P^-1`` (the posterior variances)."""
        out = np.empty(self.n_params)
        for w, b, _, q_a, q_g, _, _, eig_w, eig_b in self.groups:
            out[w] = ((q_a**2) @ (1.0 / eig_w) @ (q_g**2).T).ravel()
            out[b] = (q_g**2) @ (1.0 / eig_b)
        return out

    def inverse_sqrt_times(self, J: np.ndarray) -> np.ndarray:
        """``F J`` for ``J`` of shape ``(k, q, m)``, with ``F^T F = P^-1``: the square root
        ``D^-1/2 Q^T`` in the eigenbasis, so ``(F J)^T (F J) = J^T P^-1 J``."""
        k, q, m = J.shape
        rows = J.transpose(0, 2, 1).reshape(k * m, q)
        out = np.empty_like(rows)
        for w, b, shape, q_a, q_g, _, _, eig_w, eig_b in self.groups:
            z = _sandwich(q_a, rows[:, w].reshape(k * m, *shape), q_g)
            out[:, w] = (z / np.sqrt(eig_w)).reshape(k * m, -1)
            out[:, b] = (rows[:, b] @ q_g) / np.sqrt(eig_b)
        return out.reshape(k, m, q).transpose(0, 2, 1)

    def sample_deviations(self, z: np.ndarray) -> np.ndarray:
        """``N(0, P^-1)`` draws ``(n, q)`` from standard normal ``z`` of the same shape:
        ``Q D^-1/2 z``, with ``z`` read in the eigenbasis (where a standard normal is
        one too), so one rotation per draw instead of two."""
        n = z.shape[0]
        out = np.empty_like(z)
        if n == 0:
            return out
        for w, b, shape, q_a, q_g, _, _, eig_w, eig_b in self.groups:
            scaled = z[:, w].reshape(n, *shape) / np.sqrt(eig_w)
            out[:, w] = _sandwich(q_a.T, scaled, q_g.T).reshape(n, -1)
            out[:, b] = (z[:, b] / np.sqrt(eig_b)) @ q_g.T
        return out

    def function_covariance(self, inputs: list, deltas: list) -> np.ndarray:
        """``J P^-1 J^T`` per row (``(rows, k, k)``) from the covered layers' inputs and
        output derivatives (:func:`output_derivatives`), without the Jacobian: a weight
        block's Jacobian is ``a (x) g``, whose quadratic form in the block's eigenbasis is
        ``sum_pr (Q_A' a)_p^2 (Q_G' g)_r^2 / (lambda_p mu_r + delta)``, so a row costs
        O(fan_in^2 + fan_out^2) per layer instead of O(fan_in fan_out (fan_in + fan_out))."""
        k, m, _ = deltas[0].shape
        cov = np.zeros((m, k, k))
        layers = range(self.first_layer, self.layout.n_layers)
        for (_, _, _, q_a, q_g, _, _, eig_w, eig_b), layer, d in zip(
            self.groups, layers, deltas, strict=True
        ):
            u2 = (inputs[layer] @ q_a) ** 2
            v = d @ q_g  # (k, rows, fan_out)
            weight = u2 @ (1.0 / eig_w) + 1.0 / eig_b  # (rows, fan_out)
            cov += np.einsum("omr,pmr->mop", v * weight[None], v)
        return cov

    def function_shifts(self, inputs: list, deltas: list, dev: np.ndarray) -> np.ndarray:
        """``J dev_s`` per row (``(s, k, rows)``) for parameter deviations ``dev``
        (``(s, q)``), without the Jacobian: ``g . (a' Delta_W + Delta_b)`` per layer."""
        k, m, _ = deltas[0].shape
        out = np.zeros((dev.shape[0], k, m))
        layers = range(self.first_layer, self.layout.n_layers)
        for (w, b, shape, *_), layer, d in zip(self.groups, layers, deltas, strict=True):
            dw = dev[:, w].reshape(-1, *shape)
            t = np.matmul(inputs[layer][None], dw) + dev[:, None, b]  # (s, rows, fan_out)
            out += np.einsum("smj,omj->som", t, d)
        return out

    def trace_inverse_times(self, A, G) -> float:
        """``tr(P^-1 C)`` for the Kronecker-factored ``C`` of factors ``A``, ``G`` (per
        covered layer; ``None`` for a layer leaves it out): the effective number of
        parameters that ``C`` (one output's curvature) determines."""
        total = 0.0
        for (_, _, _, q_a, q_g, _, _, eig_w, eig_b), a, g in zip(self.groups, A, G, strict=True):
            # diagonals of A and G in this precision's eigenbases
            da = np.einsum("ip,ij,jp->p", q_a, a, q_a)
            dg = np.einsum("ip,ij,jp->p", q_g, g, q_g)
            total += float(np.sum(np.outer(da, dg) / eig_w) + np.sum(dg / eig_b))
        return total

    def to_dense(self) -> np.ndarray:
        """The precision as a dense ``(q, q)`` matrix (small networks and tests only)."""
        return self._apply(np.eye(self.n_params), 1.0)

    def inverse(self) -> np.ndarray:
        """``P^-1`` as a dense ``(q, q)`` matrix (small networks and tests only)."""
        return self._apply(np.eye(self.n_params), -1.0)

    def __repr__(self) -> str:
        return f"KronPrecision({len(self.groups)} layer(s), {self.n_params} parameters)"


def _sandwich(left: np.ndarray, X: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``left^T X_i right`` for each matrix ``X_i`` of ``X`` (``(n, a, b)``), as two
    matrix products over all of them at once (a batched product of small matrices is
    slower)."""
    n, a, b = X.shape
    t = (X.reshape(n * a, b) @ right).reshape(n, a, -1)
    c = t.shape[2]
    t = t.transpose(0, 2, 1).reshape(n * c, a) @ left
    return t.reshape(n, c, -1).transpose(0, 2, 1)


def _eigh(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    # a sum of outer products is positive semidefinite; rounding can leave its zero
    # eigenvalues a hair below zero, which the prior's delta then covers
    vals, vecs = np.linalg.eigh(0.5 * (m + m.T))
    return np.maximum(vals, 0.0), vecs
