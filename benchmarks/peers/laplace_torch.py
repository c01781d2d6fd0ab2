"""laplace-torch's full-GGN Laplace at skbnn's MAP weights, for same-run comparisons.

:func:`torch_laplace` builds the float64 ``torch.nn.Sequential`` equivalent to an skbnn
network, loads skbnn's flat MAP vector into it and runs ``laplace.Laplace(model, likelihood,
subset_of_weights="all", hessian_structure="full")`` with the given prior precision and
noise, fitted once on the full data and never tuned (no ``optimize_prior_precision``). It
returns laplace-torch's log marginal likelihood, the GLM functional variance at test rows,
the posterior precision in skbnn's parameter order and wall times.

The model, term by term:

* Layout. skbnn's ``theta = [W_1.ravel(), b_1, ..., W_L.ravel(), b_L]`` with ``W_l`` of shape
  ``(fan_in, fan_out)`` row-major; torch's ``parameters()`` order is ``[weight_1, bias_1, ...]``
  with ``weight_l = W_l.T`` of shape ``(fan_out, fan_in)``. :func:`torch_order` gives the
  permutation ``perm`` with ``theta_torch = theta[perm]``; matrices come back as
  ``M_skbnn = M_torch[inv][:, inv]`` with ``inv = argsort(perm)``.
* Likelihood. Regression: ``y_i ~ N(f(x_i), sigma_noise^2 I_k)``, one noise for all outputs
  (laplace-torch is homoscedastic). Classification with ``k_out >= 2``: softmax /
  cross-entropy, skbnn's categorical model. Classification with ``k_out == 1`` (skbnn's binary
  classifier: one logit ``f``, Bernoulli): laplace-torch only knows the softmax, so the network
  gets a parameter-free last module mapping ``f`` to the logits ``[0, f]``.
  ``softmax([0, f])[1] = sigmoid(f)``, so the likelihood, the GGN (``J^T s(1-s) J``), the
  evidence and the probit predictive are exactly the Bernoulli ones; the functional variance of
  output 1 is that of ``f`` (output 0 is constant) and is what this module returns.
* Prior. ``N(0, diag(1 / prior_precision))``; the precision is a scalar, one value per
  parameter tensor in the order ``[W_1, b_1, W_2, b_2, ...]`` (skbnn's
  ``diagnostics_["prior_precision"]``; torch's tensor order is the same), or one value per
  parameter in skbnn's order. It is always expanded here to the per-parameter vector in torch's
  order, so laplace-torch's length-based guess (scalar / per layer / diagonal) never has to
  decide.
* Curvature. ``posterior_precision = GGN / (sigma_noise^2 * temperature) + diag(prior)``, with
  ``GGN = sum_i J_i^T Lambda_i J_i`` for unit noise (``Lambda = I`` in regression,
  ``diag(p) - p p^T`` for the softmax). ``temperature`` is left at 1.

laplace-torch's log marginal likelihood (``ParametricLaplace.log_marginal_likelihood``)::

    log_likelihood - 0.5 * (logdet(P) - sum(log prior_precision) + theta^T diag(prior) theta)

with ``log_likelihood = -loss / (sigma^2 T) - n k log(sigma sqrt(2 pi))`` in regression
(``loss = 0.5 * sum (y - f)^2``: laplace-torch's ``0.5 * MSELoss(reduction="sum")``) and
``-cross_entropy_sum / T`` in classification. With ``T = 1`` that is the full normalized
log-likelihood, constants included, and the whole expression equals
``log p(y | theta) + log p(theta) + (p/2) log 2 pi - 0.5 logdet(P)`` with the normalized
Gaussian prior: the ``-(p/2) log 2 pi`` of ``log p(theta)`` cancels the ``+(p/2) log 2 pi``.
In skbnn's regressor this is the evidence on the standardized scale (before the
``- n sum(log y_std)`` Jacobian term).

Backends: ``"curvlinops"`` (laplace-torch's default: the GGN as a curvlinops linear operator
applied to an identity matrix), ``"backpack"`` and ``"asdl"`` (both use laplace-torch's generic
``GGNInterface.full``: per-row Jacobians from the backend, then ``einsum(J, Lambda, J)``). All
three are the exact GGN (``stochastic=False``). Pitfall: curvlinops' ``full`` builds its
identity with ``torch.eye(p)`` in torch's *default* dtype, float32, and then runs the GGN
products in float32 (measured on iris 4-10-3: 2e-8 relative error in the precision, 3e-7 in
the functional variance, against ~1e-15 in float64); :func:`torch_laplace` switches the default
dtype to float64 for the call and restores it afterwards.

The default here is ``"backpack"``, not laplace-torch's default: curvlinops forms the GGN
from ``p`` vmapped GGN-vector products, 30 times slower than the Jacobian route on the Boston
13-50-1 network (``fit`` 0.93 s against 0.03 s for backpack and 0.04 s for asdl, warm, one
thread); a speed comparison should not be won against the slowest exact backend.

Needs torch and laplace-torch (``pip install laplace-torch``; backpack-for-pytorch and
curvlinops-for-pytorch come with it). Standalone use, on a MAP this module finds itself with
L-BFGS (or on skbnn's, saved with ``numpy.savez``)::

    python benchmarks/peers/laplace_torch.py --problem boston --hidden 10 --check
    python benchmarks/peers/laplace_torch.py --problem iris --hidden 10 --check
    python benchmarks/peers/laplace_torch.py --npz run.npz   # X, Y, theta, layer_sizes, ...

``--check`` compares with an independent numpy computation: Jacobians of a numpy forward pass
by complex-step differentiation (exact to rounding), the GGN and evidence from them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

BACKENDS = ("curvlinops", "backpack", "asdl")
ACTIVATIONS = ("identity", "relu", "tanh", "logistic")
LOG_2PI = math.log(2.0 * math.pi)


def torch_order(layer_sizes) -> np.ndarray:
    """Permutation ``perm`` with ``theta_torch = theta_skbnn[perm]``.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``(d, *hidden, k_out)``.

    Returns
    -------
    ndarray of int64, shape (p,)
        For each layer, ``W_l`` (``(fan_in, fan_out)`` row-major in skbnn) read out as
        ``W_l.T`` row-major (torch's ``weight``), then ``b_l`` unchanged.
    """
    sizes = [int(s) for s in layer_sizes]
    perm, start = [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        mid = start + fan_in * fan_out
        perm.append(np.arange(start, mid).reshape(fan_in, fan_out).T.ravel())
        perm.append(np.arange(mid, mid + fan_out))
        start = mid + fan_out
    return np.concatenate(perm)


def _per_parameter(prior_precision, layer_sizes) -> np.ndarray:
    """The prior precision as one value per parameter, in skbnn's order."""
    sizes = [int(s) for s in layer_sizes]
    tensors = [n for a, b in zip(sizes[:-1], sizes[1:], strict=True) for n in (a * b, b)]
    n_params = sum(tensors)
    prec = np.atleast_1d(np.asarray(prior_precision, dtype=np.float64))
    if prec.ndim != 1:
        raise ValueError(f"prior_precision must be a scalar or a vector, got shape {prec.shape}")
    # p == 2 L only for a network without hidden layer and one input and output, where both
    # readings give the same vector
    if prec.size == n_params:
        out = prec.copy()
    elif prec.size == len(tensors):
        out = np.repeat(prec, tensors)
    elif prec.size == 1:
        out = np.full(n_params, prec[0])
    else:
        raise ValueError(
            f"prior_precision has {prec.size} values; expected 1, {len(tensors)} (one per "
            f"tensor W_1, b_1, ...) or {n_params} (one per parameter)"
        )
    if not np.all(np.isfinite(out) & (out > 0)):
        raise ValueError("prior_precision must be positive and finite")
    return out


def build_model(layer_sizes, activation: str, binary: bool = False):
    """The float64 ``nn.Sequential`` of skbnn's network (no parameters set).

    Parameters
    ----------
    layer_sizes : sequence of int
        ``(d, *hidden, k_out)``.
    activation : {"identity", "relu", "tanh", "logistic"}
        Hidden activation (skbnn's, i.e. scikit-learn's, names).
    binary : bool, default=False
        Append the parameter-free map ``f -> [0, f]`` that turns skbnn's single Bernoulli logit
        into laplace-torch's two softmax logits.

    Returns
    -------
    torch.nn.Sequential
    """
    import torch
    from torch import nn

    class BinaryLogits(nn.Module):
        """``f -> [0, f]``: softmax of these logits is ``[1 - sigmoid(f), sigmoid(f)]``."""

        def forward(self, f):
            return torch.cat([torch.zeros_like(f), f], dim=-1)

    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    act = {"relu": nn.ReLU, "tanh": nn.Tanh, "logistic": nn.Sigmoid}.get(activation)
    sizes = [int(s) for s in layer_sizes]
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        layers.append(nn.Linear(a, b, dtype=torch.float64))
        # identity: no module at all rather than nn.Identity, so every backend sees only
        # Linear and standard activation modules
        if i < len(sizes) - 2 and act is not None:
            layers.append(act())
    if binary:
        layers.append(BinaryLogits())
    return nn.Sequential(*layers)


def _backend_class(name: str):
    from laplace import curvature

    classes = {"curvlinops": "CurvlinopsGGN", "backpack": "BackPackGGN", "asdl": "AsdlGGN"}
    if name not in classes:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    return getattr(curvature, classes[name])


def torch_laplace(
    X: np.ndarray,
    Y: np.ndarray,
    layer_sizes,
    theta: np.ndarray,
    *,
    activation: str = "tanh",
    likelihood: str = "regression",
    prior_precision=1.0,
    sigma_noise: float = 1.0,
    X_test: np.ndarray | None = None,
    backend: str = "backpack",
    n_threads: int = 1,
    batch_size: int | None = None,
    warmup: bool = True,
    hessian_structure: str = "full",
) -> dict:
    """laplace-torch's full-GGN Laplace at skbnn's parameters; see the module docstring.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Training features, as the skbnn network saw them.
    Y : ndarray of shape (n, k) or (n,)
        Regression: the standardized targets. Classification: integer class codes
        ``0 .. K-1`` (skbnn's encoded labels; 0/1 for the binary classifier).
    layer_sizes : sequence of int
        ``(d, *hidden, k_out)``; ``k_out = 1`` with ``likelihood="classification"`` is skbnn's
        binary (Bernoulli) classifier.
    theta : ndarray of shape (p,)
        skbnn's flat MAP vector (without noise parameters).
    activation : {"tanh", "relu", "logistic", "identity"}, default="tanh"
    likelihood : {"regression", "classification"}, default="regression"
    prior_precision : float or array-like, default=1.0
        Scalar, one value per tensor ``[W_1, b_1, ...]``, or one per parameter in skbnn's order.
    sigma_noise : float, default=1.0
        Noise standard deviation (regression, standardized scale; one for all outputs).
        Must be 1 for classification.
    X_test : ndarray of shape (n_test, d), optional
        Rows for the GLM functional variance (default: ``X``).
    backend : {"backpack", "asdl", "curvlinops"}, default="backpack"
        laplace-torch's GGN backend, all exact (``stochastic=False``); see the module
        docstring for why the default is not laplace-torch's own (curvlinops).
    n_threads : int, default=1
        ``torch.set_num_threads`` for the call (restored afterwards).
    batch_size : int, optional
        Rows per batch of the GGN accumulation (default: all rows in one batch).
    warmup : bool, default=True
        Run the whole computation once, untimed, before the timed run. The first call in a
        process pays one-off costs (torch.func/vmap tracing, lazy LAPACK loading: curvlinops'
        first fit of a 151-parameter network took 0.2 s against 0.03 s for the second).
    hessian_structure : {"full", "kron"}, default="full"
        laplace-torch's ``hessian_structure``: the full GGN, or its Kronecker-factored
        approximation (``KronLaplace``; the backpack backend's exact ``KFLR`` factors, as
        skbnn's ``Laplace(hessian="kron")``).

    Returns
    -------
    dict
        ``log_marglik`` (laplace-torch's), its terms ``log_likelihood``, ``log_det_ratio``
        (``logdet P - logdet P_0``) and ``scatter`` (``theta^T P_0 theta``); ``f_mu``
        ``(n_test, k)`` and ``f_var`` ``(n_test, k, k)`` (GLM functional mean and covariance,
        noise excluded; ``k = 1`` for the binary classifier); ``proba`` (classification only:
        laplace-torch's GLM probit predictive, ``(n_test, K)``, two columns for binary);
        ``posterior_precision`` and ``ggn`` (``P - diag(P_0)``), both ``(p, p)`` in skbnn's
        order; ``prior_precision`` ``(p,)`` in skbnn's order; ``setup_time``, ``fit_time``,
        ``marglik_time``, ``predictive_time`` (``time.perf_counter`` seconds: building the
        Laplace object, ``fit``, ``log_marginal_likelihood()``, and the GLM functional
        variance, which includes laplace-torch's lazy inversion of ``P``); ``backend``,
        ``torch`` and ``laplace`` versions, ``n_threads``.
    """
    import laplace
    import torch
    from torch.nn.utils import vector_to_parameters
    from torch.utils.data import DataLoader, TensorDataset

    if likelihood not in ("regression", "classification"):
        raise ValueError(f"likelihood must be 'regression' or 'classification', got {likelihood!r}")
    sizes = [int(s) for s in layer_sizes]
    X = np.ascontiguousarray(X, dtype=np.float64)
    X_test = X if X_test is None else np.ascontiguousarray(X_test, dtype=np.float64)
    theta = np.asarray(theta, dtype=np.float64).ravel()
    perm = torch_order(sizes)
    if theta.size != perm.size:
        raise ValueError(f"theta has {theta.size} values, the network {perm.size} parameters")
    if X.shape[1] != sizes[0]:
        raise ValueError(f"X has {X.shape[1]} columns, layer_sizes[0] is {sizes[0]}")
    prec = _per_parameter(prior_precision, sizes)
    binary = likelihood == "classification" and sizes[-1] == 1
    sigma = np.unique(np.atleast_1d(np.asarray(sigma_noise, dtype=np.float64)))
    if sigma.size != 1:
        raise ValueError("laplace-torch has one noise sd for all outputs; got several")
    sigma = float(sigma[0])
    if likelihood == "classification":
        if sigma != 1.0:
            raise ValueError("sigma_noise must be 1 for classification")
        Yt = torch.as_tensor(np.asarray(Y).ravel().astype(np.int64))
    else:
        Y = np.asarray(Y, dtype=np.float64)
        Yt = torch.as_tensor(Y.reshape(len(Y), -1).copy())
        if Yt.shape[1] != sizes[-1]:
            raise ValueError(f"Y has {Yt.shape[1]} columns, the network {sizes[-1]} outputs")

    old_threads, old_dtype = torch.get_num_threads(), torch.get_default_dtype()
    torch.set_num_threads(n_threads)
    # curvlinops' full GGN multiplies by torch.eye(p) in the default dtype (module docstring)
    torch.set_default_dtype(torch.float64)
    try:
        model = build_model(sizes, activation, binary)
        with torch.no_grad():
            vector_to_parameters(torch.as_tensor(theta[perm].copy()), model.parameters())
        Xt, Xs = torch.as_tensor(X), torch.as_tensor(X_test)
        loader = DataLoader(TensorDataset(Xt, Yt), batch_size=batch_size or len(X))
        prior = torch.as_tensor(prec[perm].copy())
        if hessian_structure == "kron":
            # KronLaplace takes one precision per tensor ([W_1, b_1, ...], torch's order too)
            per_tensor = np.atleast_1d(np.asarray(prior_precision, dtype=np.float64))
            if per_tensor.size not in (1, 2 * (len(sizes) - 1)):
                raise ValueError("hessian_structure='kron' needs one prior precision per tensor")
            prior = torch.as_tensor(per_tensor.copy())
        for _ in range(2 if warmup else 1):
            t0 = time.perf_counter()
            la = laplace.Laplace(
                model, likelihood, subset_of_weights="all", hessian_structure=hessian_structure,
                sigma_noise=sigma, prior_precision=prior,
                temperature=1.0, backend=_backend_class(backend),
            )  # fmt: skip
            t1 = time.perf_counter()
            la.fit(loader)
            t2 = time.perf_counter()
            log_marglik = la.log_marginal_likelihood()
            t3 = time.perf_counter()
            # the private method la(X, pred_type="glm") calls: it gives the functional
            # covariance for classification too, before any link approximation
            f_mu, f_var = la._glm_predictive_distribution(Xs)
            t4 = time.perf_counter()
        proba = None
        if likelihood == "classification":
            proba = la(Xs, pred_type="glm", link_approx="probit").detach().numpy()
        inv = np.argsort(perm)
        P = la.posterior_precision
        # the Kronecker-factored precision is held by its factors' eigendecompositions
        P = (P.to_matrix() if hessian_structure == "kron" else P).detach().numpy()
        P = P[np.ix_(inv, inv)]
        out = {
            "log_marglik": float(log_marglik),
            "log_likelihood": float(la.log_likelihood),
            "log_det_ratio": float(la.log_det_ratio),
            "scatter": float(la.scatter),
            "f_mu": f_mu.numpy()[:, 1:] if binary else f_mu.numpy(),
            "f_var": f_var.numpy()[:, 1:, 1:] if binary else f_var.numpy(),
            "proba": proba,
            "posterior_precision": P,
            "ggn": P - np.diag(prec),
            "prior_precision": prec,
            "setup_time": t1 - t0,
            "fit_time": t2 - t1,
            "marglik_time": t3 - t2,
            "predictive_time": t4 - t3,
            "backend": backend,
            "torch": torch.__version__,
            "laplace": getattr(laplace, "__version__", _version("laplace-torch")),
            "n_threads": n_threads,
        }
    finally:
        torch.set_default_dtype(old_dtype)
        torch.set_num_threads(old_threads)
    return out


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


# ----------------------------------------------------------------------------------------
# Independent reference (numpy) and problems for the standalone run
# ----------------------------------------------------------------------------------------


def numpy_forward(theta, X, layer_sizes, activation: str) -> np.ndarray:
    """skbnn's network in plain numpy; works on complex ``theta`` (complex-step derivatives).

    Returns the outputs ``(n, k_out)``.
    """
    sizes = [int(s) for s in layer_sizes]
    h, start = X, 0
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
        W = theta[start : start + a * b].reshape(a, b)
        bias = theta[start + a * b : start + a * b + b]
        start += a * b + b
        h = h @ W + bias
        if i < len(sizes) - 2:
            if activation == "tanh":
                h = np.tanh(h)
            elif activation == "relu":
                h = np.where(h.real > 0, h, 0)
            elif activation == "logistic":
                h = 1.0 / (1.0 + np.exp(-h))
    return h


def numpy_jacobian(theta, X, layer_sizes, activation: str, step: float = 1e-30) -> np.ndarray:
    """``J[i, o, j] = d f_o(x_i) / d theta_j`` by complex-step differentiation.

    ``Im f(theta + i h e_j) / h`` has no subtractive cancellation, and its truncation error,
    ``O(h^2)``, is nil at ``h = 1e-30``: exact to rounding for the analytic activations
    (ReLU is piecewise linear, exact away from its kink).
    """
    theta = np.asarray(theta, dtype=np.float64)
    n, k = X.shape[0], int(layer_sizes[-1])
    J = np.empty((n, k, theta.size))
    tc = theta.astype(np.complex128)
    for j in range(theta.size):
        tc[j] += 1j * step
        J[:, :, j] = numpy_forward(tc, X, layer_sizes, activation).imag / step
        tc[j] = theta[j]
    return J


def numpy_laplace(X, Y, layer_sizes, theta, *, activation, likelihood, prior_precision,
                  sigma_noise=1.0, X_test=None) -> dict:  # fmt: skip
    """The same quantities as :func:`torch_laplace`, from numpy alone (skbnn's order).

    GGN ``sum_i J_i^T Lambda_i J_i`` with ``Lambda`` = ``I / sigma^2`` (Gaussian),
    ``s (1 - s)`` (Bernoulli, one logit) or ``diag(p) - p p^T`` (softmax); evidence
    ``log p(y | theta) + log p(theta) + (p/2) log 2 pi - 0.5 logdet(H)`` with the normalized
    Gaussian likelihood and prior; ``f_var = J_* H^{-1} J_*^T``.
    """
    from scipy.special import log_softmax, softmax

    sizes = [int(s) for s in layer_sizes]
    theta = np.asarray(theta, dtype=np.float64)
    prec = _per_parameter(prior_precision, sizes)
    X_test = X if X_test is None else X_test
    f = numpy_forward(theta, X, sizes, activation)
    J = numpy_jacobian(theta, X, sizes, activation)
    n, k = f.shape
    if likelihood == "regression":
        r = np.asarray(Y, dtype=np.float64).reshape(n, k) - f
        loglik = (
            -0.5 * n * k * math.log(2 * math.pi * sigma_noise**2)
            - 0.5 * np.sum(r * r) / sigma_noise**2
        )
        ggn = np.einsum("iop,ioq->pq", J, J) / sigma_noise**2
    elif k == 1:
        y = np.asarray(Y).ravel().astype(np.float64)
        z = f[:, 0]
        loglik = float(np.sum(y * z - np.logaddexp(0.0, z)))
        s = 1.0 / (1.0 + np.exp(-z))
        ggn = np.einsum("ip,i,iq->pq", J[:, 0], s * (1 - s), J[:, 0])
    else:
        y = np.asarray(Y).ravel().astype(np.int64)
        loglik = float(np.sum(log_softmax(f, axis=1)[np.arange(n), y]))
        pr = softmax(f, axis=1)
        lam = np.einsum("io,ol->iol", pr, np.eye(k)) - np.einsum("io,il->iol", pr, pr)
        ggn = np.einsum("iop,iol,ilq->pq", J, lam, J)
    H = ggn + np.diag(prec)
    logprior = 0.5 * np.sum(np.log(prec) - LOG_2PI) - 0.5 * np.sum(prec * theta**2)
    sign, logdet = np.linalg.slogdet(H)
    Js = numpy_jacobian(theta, X_test, sizes, activation)
    Js2 = Js.reshape(-1, theta.size)
    # row a's block: J_a H^{-1} J_a^T, from one solve against all test Jacobian rows
    S = np.linalg.solve(H, Js2.T).T.reshape(Js.shape)
    f_var = np.einsum("aop,alp->aol", Js, S)
    return {
        "log_marglik": float(loglik + logprior + 0.5 * theta.size * LOG_2PI - 0.5 * logdet),
        "log_likelihood": float(loglik),
        "log_prior": float(logprior),
        "logdet_H": float(logdet) if sign > 0 else float("nan"),
        "posterior_precision": H,
        "ggn": ggn,
        "f_mu": numpy_forward(theta, X_test, sizes, activation),
        "f_var": f_var,
    }


def _skbnn_forward(theta, X, layer_sizes, activation) -> np.ndarray | None:
    """skbnn's own numba forward pass, ``(n, k)``; None if skbnn is not importable."""
    try:
        from skbnn.kernels.density import forward_batch
        from skbnn.layout import ACTIVATIONS as CODES
        from skbnn.layout import NetworkLayout
    except ImportError:
        return None
    layout = NetworkLayout(layer_sizes)
    out = np.empty((1, int(layer_sizes[-1]), len(X)))
    # feature-major and flat, as skbnn.posterior passes it
    XT = np.array(np.asarray(X, dtype=np.float64).T, order="C").ravel()
    forward_batch(np.asarray(theta, dtype=np.float64)[None], XT, layout.sizes, layout.offsets,
                  CODES[activation], len(X), out)  # fmt: skip
    return out[0].T


def load_problem(problem: str, split: int = 0):
    """``(X, Y, X_test, likelihood)`` of a named problem, X standardized by the train rows.

    ``boston``: UCI split ``split`` of /work/shared/data/uci, y standardized (population sd).
    ``iris``: scikit-learn's iris (3 classes), every 5th row held out. ``iris-binary``: the same
    rows, versicolor (1) against the rest (0).
    """
    if problem == "boston":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _uci import load_split, standardize

        X, y, X_test, _ = load_split("bostonHousing", split)
        X, X_test = standardize(X, X_test)
        return X, ((y - y.mean()) / y.std())[:, None], X_test, "regression"
    if problem in ("iris", "iris-binary"):
        from sklearn.datasets import load_iris

        data = load_iris()
        test = np.arange(len(data.target)) % 5 == 0
        X, X_test = data.data[~test], data.data[test]
        mean, sd = X.mean(0), X.std(0)
        y = data.target[~test] if problem == "iris" else (data.target[~test] == 1).astype(int)
        return (X - mean) / sd, y, (X_test - mean) / sd, "classification"
    raise ValueError(f"unknown problem {problem!r}")


def fit_map(X, Y, layer_sizes, *, activation, likelihood, prior_precision, sigma_noise=1.0,
            seed=0, max_iter=500) -> tuple[np.ndarray, dict]:  # fmt: skip
    """A MAP in skbnn's layout by scipy's L-BFGS on torch gradients (for standalone runs).

    Initialization ``N(0, 1 / fan_in)`` weights, zero biases; the objective is the negative
    log joint with the normalized likelihood and the ``N(0, 1/prior_precision)`` prior.
    The Laplace identities checked here hold at any theta, so ``max_iter`` is modest.

    Returns
    -------
    theta : ndarray of shape (p,)
    info : dict
        ``map_iter`` (L-BFGS iterations) and ``map_grad_max`` (largest gradient entry at the
        end: how far from a stationary point theta is).
    """
    import torch
    import torch.nn.functional as F
    from scipy.optimize import minimize

    torch.set_num_threads(1)  # tiny matrices: more threads only add overhead
    sizes = [int(s) for s in layer_sizes]
    prec = torch.as_tensor(_per_parameter(prior_precision, sizes))
    rng = np.random.default_rng(seed)
    parts = []
    for a, b in zip(sizes[:-1], sizes[1:], strict=True):
        parts += [rng.normal(0.0, 1.0 / math.sqrt(a), a * b), np.zeros(b)]
    Xt = torch.as_tensor(np.asarray(X, dtype=np.float64))

    def forward(th):
        h, start = Xt, 0
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            h = h @ th[start : start + a * b].reshape(a, b) + th[start + a * b : start + a * b + b]
            start += a * b + b
            if i < len(sizes) - 2:
                h = {"tanh": torch.tanh, "relu": torch.relu, "logistic": torch.sigmoid}.get(
                    activation, lambda v: v
                )(h)
        return h

    if likelihood == "regression":
        Yt = torch.as_tensor(np.asarray(Y, dtype=np.float64).reshape(len(X), -1))

        def nll(f):
            return 0.5 * ((Yt - f) ** 2).sum() / sigma_noise**2
    elif sizes[-1] == 1:
        Yt = torch.as_tensor(np.asarray(Y, dtype=np.float64).ravel())

        def nll(f):
            return F.binary_cross_entropy_with_logits(f[:, 0], Yt, reduction="sum")
    else:
        Yt = torch.as_tensor(np.asarray(Y).ravel().astype(np.int64))

        def nll(f):
            return F.cross_entropy(f, Yt, reduction="sum")

    def fun(x):
        th = torch.as_tensor(x).requires_grad_()
        loss = nll(forward(th)) + 0.5 * (prec * th * th).sum()
        loss.backward()
        return float(loss.detach()), th.grad.numpy().copy()

    res = minimize(fun, np.concatenate(parts), jac=True, method="L-BFGS-B",
                   options={"maxiter": max_iter, "gtol": 1e-8, "ftol": 1e-14})  # fmt: skip
    return res.x, {"map_iter": int(res.nit), "map_grad_max": float(np.max(np.abs(res.jac)))}


def _rel(a, b) -> float:
    """Largest absolute difference relative to the largest magnitude of the reference b."""
    return float(np.max(np.abs(np.asarray(a) - b)) / np.max(np.abs(b)))


def check(res: dict, ref: dict) -> dict:
    """Agreement of :func:`torch_laplace`'s result with :func:`numpy_laplace`'s."""
    diag_t = np.diagonal(res["f_var"], axis1=1, axis2=2)
    diag_r = np.diagonal(ref["f_var"], axis1=1, axis2=2)
    return {
        "precision_rel": _rel(res["posterior_precision"], ref["posterior_precision"]),
        "ggn_rel": _rel(res["ggn"], ref["ggn"]),
        "log_marglik_ref": ref["log_marglik"],
        "log_marglik_abs_diff": abs(res["log_marglik"] - ref["log_marglik"]),
        "log_likelihood_abs_diff": abs(res["log_likelihood"] - ref["log_likelihood"]),
        "f_mu_rel": _rel(res["f_mu"], ref["f_mu"]),
        "f_var_diag_max_rel": float(np.max(np.abs(diag_t - diag_r) / diag_r)),
        "f_var_rel": _rel(res["f_var"], ref["f_var"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", default="boston", choices=("boston", "iris", "iris-binary"))
    parser.add_argument("--split", type=int, default=0, help="UCI split (boston)")
    parser.add_argument("--hidden", type=int, nargs="*", default=[10], help="hidden widths")
    parser.add_argument("--activation", default="tanh", choices=ACTIVATIONS)
    parser.add_argument("--noise-std", type=float, default=0.5, help="regression, standardized")
    parser.add_argument("--prior", default="fan-in",
                        help="'fan-in' (weights fan_in, biases 1: skbnn's GaussianPrior()), "
                        "'random' (per parameter, log-uniform on [0.3, 3]: exercises the "
                        "parameter order) or a number")  # fmt: skip
    parser.add_argument("--npz", help="run on arrays saved by numpy.savez instead: X, Y, theta, "
                        "layer_sizes, prior_precision, activation, likelihood, and optionally "
                        "sigma_noise, X_test")  # fmt: skip
    parser.add_argument("--backend", nargs="+", default=["backpack"], choices=BACKENDS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check", action="store_true",
                        help="compare with the independent numpy computation")  # fmt: skip
    args = parser.parse_args()
    command = " ".join(["python", *sys.argv])

    if args.npz:
        data = np.load(args.npz, allow_pickle=False)
        X, Y, theta = data["X"], data["Y"], data["theta"]
        sizes = [int(s) for s in data["layer_sizes"]]
        activation, likelihood = str(data["activation"]), str(data["likelihood"])
        prior = data["prior_precision"]
        sigma = float(data["sigma_noise"]) if "sigma_noise" in data else 1.0
        X_test = data["X_test"] if "X_test" in data else X
        problem = {"npz": args.npz}
    else:
        X, Y, X_test, likelihood = load_problem(args.problem, args.split)
        activation = args.activation
        k = Y.shape[1] if likelihood == "regression" else (1 if args.problem == "iris-binary"
                                                           else int(Y.max()) + 1)  # fmt: skip
        sizes = [X.shape[1], *args.hidden, k]
        p = int(torch_order(sizes).size)
        if args.prior == "fan-in":
            prior = np.concatenate([[a, 1.0] for a in sizes[:-1]])
        elif args.prior == "random":
            prior = np.exp(np.random.default_rng(args.seed + 1).uniform(-1.2, 1.1, p))
        else:
            prior = float(args.prior)
        sigma = args.noise_std if likelihood == "regression" else 1.0
        t0 = time.perf_counter()
        theta, info = fit_map(X, Y, sizes, activation=activation, likelihood=likelihood,
                        prior_precision=prior, sigma_noise=sigma, seed=args.seed)  # fmt: skip
        problem = {"problem": args.problem, "split": args.split, "prior": args.prior,
                   "map_time": time.perf_counter() - t0, **info}  # fmt: skip

    ref = None
    if args.check:
        ref = numpy_laplace(X, Y, sizes, theta, activation=activation, likelihood=likelihood,
                            prior_precision=prior, sigma_noise=sigma, X_test=X_test)  # fmt: skip
    for backend in args.backend:
        res = torch_laplace(X, Y, sizes, theta, activation=activation, likelihood=likelihood,
                            prior_precision=prior, sigma_noise=sigma, X_test=X_test,
                            backend=backend, n_threads=args.threads)  # fmt: skip
        record = {"peer": "laplace-torch", "command": command, **problem,
                  "layer_sizes": sizes, "activation": activation, "likelihood": likelihood,
                  "n": len(X), "n_test": len(X_test), "n_params": len(theta),
                  "sigma_noise": sigma}  # fmt: skip
        record.update({key: res[key] for key in (
            "backend", "torch", "laplace", "n_threads", "log_marglik", "log_likelihood",
            "log_det_ratio", "scatter", "setup_time", "fit_time", "marglik_time",
            "predictive_time")})  # fmt: skip
        record["f_var_diag_mean"] = float(np.mean(np.diagonal(res["f_var"], axis1=1, axis2=2)))
        if ref is not None:
            record.update(check(res, ref))
            fwd = _skbnn_forward(theta, X_test, sizes, activation)
            if fwd is not None:
                # layout check: skbnn's own kernel against laplace-torch's network output
                record["skbnn_forward_rel"] = _rel(res["f_mu"], fwd)
        print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
