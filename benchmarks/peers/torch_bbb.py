"""skbnn's Bayes by Backprop (``method="vi"``) in PyTorch on CPU, for same-machine timing.

The same model and training as ``BayesianMLPRegressor(hidden_layer_sizes=(hidden,),
activation="relu", method=VariationalInference(n_mc=n_mc, init_std=init_std,
learning_rate_init=lr, batch_size=B, max_iter=epochs, tol=0))`` with its default prior
and inferred noise:

* X as given (standardize it first); y standardized with its training mean and population
  sd. float64 throughout.
* The model: a ``d -> hidden (ReLU) -> 1`` network; weights ~ N(0, 1/fan_in), biases
  ~ N(0, 1) (``GaussianPrior(std=1)``); Gaussian noise with precision ``tau`` on the
  standardized target, ``tau ~ Gamma(1, 1e-3)``; the parameters are the weights, biases
  and ``eta = log tau``.
* ``q``: mean-field Gaussian over all of them, ``sigma = softplus(rho)`` (Blundell et al.
  2015). Means start as scikit-learn's MLP initializes (``U(-a, a)``, ``a = sqrt(6 /
  (fan_in + fan_out))``, biases too), ``eta``'s mean at 0, every ``sigma`` at
  ``init_std``.
* Each step ascends ``(n / B) loglik_B + E_q[log p(w)] + E_q[log p(eta)] + H[q]``, the
  per-step objective whose row-weighted average over an epoch is exactly the ELBO (no KL
  weights): the weights' prior term and the entropy in closed form, the noise's Gamma
  prior term at the draw of ``eta``, and the minibatch's expected log-likelihood by the
  local reparameterization trick (Kingma et al. 2015): each layer's pre-activations drawn
  per row from ``N(a mu_W + mu_b, a^2 sigma_W^2 + sigma_b^2)``, ``eta`` drawn once per
  step. ``n_mc`` such draws per step, averaged. The loss is minus that over ``n``, so
  Adam's step matches skbnn's (which scales the gradient by ``1 / n``).
* ``torch.optim.Adam`` with its defaults (betas 0.9/0.999, eps 1e-8) at a constant
  learning rate; every epoch a fresh permutation cut into consecutive batches of B, the
  last partial batch included; exactly ``epochs`` epochs.

The fitted ``q`` comes back as flat numpy vectors in skbnn's parameter layout (``[W1.ravel(),
b1, W2.ravel(), b2, eta]``, ``W`` of shape ``(fan_in, fan_out)``), so both sides' ``q`` are
judged by the same numpy code in this module: :func:`elbo_draws` (the ELBO estimator of
``VariationalInference``: ``log p(y, theta) - log q(theta)`` over all rows at independent
draws of ``q``, in y's original units) and :func:`predictive_log_density` (the mixture
of the draws' Gaussians, as skbnn predicts). Neither needs torch.

Needs torch (CPU build)::

    python benchmarks/peers/torch_bbb.py --case boston --epochs 700 --batch-size 32
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

LOG_2PI = math.log(2.0 * math.pi)
#: Gamma(shape, rate) prior of the noise precision on the standardized target, as skbnn's
#: ``skbnn.priors.NOISE_PRECISION_SHAPE`` / ``NOISE_PRECISION_RATE``.
NOISE_SHAPE, NOISE_RATE = 1.0, 1e-3


@dataclass
class TorchBBB:
    """A fitted ``q``: its means and sds in skbnn's flat layout, y's scaling, timings."""

    mu: np.ndarray
    sigma: np.ndarray
    sizes: tuple
    y_mean: float
    y_sd: float
    fit_time: float
    loss_curve: np.ndarray = field(default_factory=lambda: np.empty(0))


def prior_std(sizes) -> np.ndarray:
    """The prior sd of every network parameter in skbnn's layout: ``1 / sqrt(fan_in)`` for
    weights, 1 for biases (``GaussianPrior(std=1, fan_in_scaling=True)``)."""
    out = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        out += [np.full(fan_in * fan_out, 1.0 / math.sqrt(fan_in)), np.ones(fan_out)]
    return np.concatenate(out)


def _unpack(theta: np.ndarray, sizes) -> list:
    """``[(W, b), ...]`` views of a batch of flat vectors ``theta`` (n_draws, n_params)."""
    layers, pos = [], 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        w = theta[:, pos : pos + fan_in * fan_out].reshape(-1, fan_in, fan_out)
        pos += fan_in * fan_out
        layers.append((w, theta[:, pos : pos + fan_out]))
        pos += fan_out
    return layers


def _outputs(theta: np.ndarray, sizes, X: np.ndarray) -> np.ndarray:
    """The network's output (n_draws, n_rows) at each draw, ReLU hidden layers."""
    a = np.broadcast_to(X, (theta.shape[0], *X.shape))
    layers = _unpack(theta, sizes)
    for i, (w, b) in enumerate(layers):
        a = a @ w + b[:, None, :]
        if i < len(layers) - 1:
            a = np.maximum(a, 0.0)
    return a[:, :, 0]


def elbo_draws(mu, sigma, sizes, X, y, y_mean, y_sd, n_draws=100, seed=0, chunk=20):
    """``n_draws`` independent estimates of the ELBO of ``q = N(mu, diag(sigma^2))`` in
    y's original units: ``log p(y, theta) - log q(theta)`` over all rows at draws of ``q``,
    less ``n log(y_sd)`` (the standardization's Jacobian). Their mean is the ELBO; their sd
    over ``sqrt(n_draws)`` its Monte Carlo standard error.

    ``mu`` and ``sigma`` are flat in skbnn's layout with ``eta = log tau`` last.
    """
    rng = np.random.default_rng(seed)
    z = (np.asarray(y, dtype=np.float64) - y_mean) / y_sd
    n = z.size
    s0 = prior_std(sizes)
    n_w = s0.size
    out = []
    for lo in range(0, n_draws, chunk):
        eps = rng.standard_normal((min(chunk, n_draws - lo), mu.size))
        theta = mu + sigma * eps
        eta = theta[:, n_w]
        tau = np.exp(eta)
        f = _outputs(theta[:, :n_w], sizes, X)
        sq = np.sum((z - f) ** 2, axis=1)
        loglik = n * (0.5 * eta - 0.5 * LOG_2PI) - 0.5 * tau * sq
        w = theta[:, :n_w]
        logp_w = -0.5 * np.sum((w / s0) ** 2, axis=1) - np.sum(np.log(s0)) - 0.5 * n_w * LOG_2PI
        logp_eta = (NOISE_SHAPE * eta - NOISE_RATE * tau + NOISE_SHAPE * math.log(NOISE_RATE)
                    - math.lgamma(NOISE_SHAPE))  # fmt: skip
        log_q = -0.5 * np.sum(eps**2, axis=1) - np.sum(np.log(sigma)) - 0.5 * mu.size * LOG_2PI
        out.append(loglik + logp_w + logp_eta - log_q)
    return np.concatenate(out) - n * math.log(y_sd)


def predictive_log_density(thetas, sizes, X, y, y_mean, y_sd) -> np.ndarray:
    """Per test row, the log density of ``y`` (original units) under the equally weighted
    mixture of the draws' Gaussians ``N(f(x; theta) y_sd + y_mean, y_sd^2 / tau)``, as
    skbnn predicts; ``thetas`` (n_draws, n_params) in skbnn's layout, ``log tau`` last."""
    thetas = np.asarray(thetas, dtype=np.float64)
    n_w = thetas.shape[1] - 1
    f = _outputs(thetas[:, :n_w], sizes, X) * y_sd + y_mean
    var = y_sd**2 / np.exp(thetas[:, n_w])[:, None]
    logp = -0.5 * (LOG_2PI + np.log(var) + (y - f) ** 2 / var)
    return logsumexp(logp, axis=0) - math.log(thetas.shape[0])


def sample_q(mu, sigma, n_draws: int, seed: int = 0) -> np.ndarray:
    """``n_draws`` draws of ``q = N(mu, diag(sigma^2))``."""
    rng = np.random.default_rng(seed)
    return mu + sigma * rng.standard_normal((n_draws, mu.size))


def _inverse_softplus(s: float) -> float:
    return s + math.log(-math.expm1(-s))


def train_bbb(
    X: np.ndarray,
    y: np.ndarray,
    *,
    hidden: int | tuple = 50,
    epochs: int = 100,
    batch_size: int = 32,
    lr: float = 1e-3,
    n_mc: int = 1,
    init_std: float = 0.01,
    seed: int = 0,
    n_threads: int = 1,
    fused: bool = False,
) -> TorchBBB:
    """Fit ``q`` by Bayes by Backprop; see the module docstring for the model.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Features, used as given.
    y : ndarray of shape (n,)
        Targets in original units (standardized inside).
    hidden, epochs, batch_size, lr, n_mc, init_std : int, int, int, float, int, float
        Hidden ReLU units (an int, or a tuple of layer widths), passes over the data,
        minibatch rows B, Adam's constant learning rate, draws per step, the initial
        ``sigma``.
    seed : int
        Seeds torch's generator (initialization, permutations and draws).
    n_threads : int
        ``torch.set_num_threads``.
    fused : bool
        Adam's fused CPU implementation.

    Returns
    -------
    TorchBBB
        ``mu`` and ``sigma`` in skbnn's layout, ``fit_time`` (wall seconds, from the
        numpy arrays to the trained ``q``) and ``loss_curve`` (per epoch: minus the
        epoch's ELBO estimate per row, standardized units, as skbnn's
        ``diagnostics_["loss_curve"]``).
    """
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(n_threads)
    start = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    n, d = X.shape
    y_mean, y_sd = float(y.mean()), float(y.std())
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy((y - y_mean) / y_sd)
    sizes = (d, *((hidden,) if isinstance(hidden, int) else hidden), 1)
    gen = torch.Generator().manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))

    # q's means and rhos as one flat vector each, in skbnn's layout: two tensors for Adam
    # instead of ten (its per-tensor loop is most of a step's cost at this size), and
    # the layers are views
    s0 = torch.from_numpy(prior_std(sizes))
    n_w = int(s0.numel())
    mu0 = np.zeros(n_w + 1)  # eta = log tau starts at 0, unit noise
    pos = 0
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        a = math.sqrt(6.0 / (fan_in + fan_out))
        k = (fan_in + 1) * fan_out
        mu0[pos : pos + k] = torch.empty(k, dtype=torch.float64).uniform_(-a, a, generator=gen)
        pos += k
    mu = torch.from_numpy(mu0).requires_grad_()
    rho = torch.full((n_w + 1,), _inverse_softplus(init_std), dtype=torch.float64)
    rho.requires_grad_()
    inv_s0_sq = 1.0 / s0**2
    # E_q[log p(w)]'s constant, H[q]'s constant and the Gamma prior's
    const = (-float(torch.log(s0).sum()) - 0.5 * n_w * LOG_2PI + 0.5 * (n_w + 1) * (1 + LOG_2PI)
             + NOISE_SHAPE * math.log(NOISE_RATE) - math.lgamma(NOISE_SHAPE))  # fmt: skip

    def layers(t):
        # [(W, b) per layer] views of a flat vector in skbnn's layout, and eta
        out, pos = [], 0
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
            w = t[pos : pos + fan_in * fan_out].view(fan_in, fan_out)
            pos += fan_in * fan_out
            out.append((w, t[pos : pos + fan_out]))
            pos += fan_out
        return out, t[pos:]

    opt = torch.optim.Adam([mu, rho], lr=lr, fused=fused or None)
    curve = np.zeros(epochs)
    for epoch in range(epochs):
        perm = torch.randperm(n, generator=gen)
        Xp, yp = Xt[perm], yt[perm]
        total = 0.0
        for lo in range(0, n, batch_size):
            xb, yb = Xp[lo : lo + batch_size], yp[lo : lo + batch_size]
            nb = xb.shape[0]
            sig = F.softplus(rho)
            var = sig * sig
            means, m_eta = layers(mu)
            variances, _ = layers(var)
            s_eta = sig[n_w:]
            ell = 0.0
            for _ in range(n_mc):
                h = xb
                for i, ((mw, mb), (vw, vb)) in enumerate(zip(means, variances, strict=True)):
                    m = torch.addmm(mb, h, mw)
                    v = torch.addmm(vb, h * h, vw)
                    h = m + v.sqrt() * torch.randn(m.shape, generator=gen, dtype=torch.float64)
                    if i < len(means) - 1:
                        h = torch.relu(h)
                f = h[:, 0]
                eta = m_eta + s_eta * torch.randn(1, generator=gen, dtype=torch.float64)
                tau = eta.exp()
                sq = ((yb - f) ** 2).sum()
                ll = nb * (0.5 * eta - 0.5 * LOG_2PI) - 0.5 * tau * sq
                ell = ell + (n / nb) * ll + NOISE_SHAPE * eta - NOISE_RATE * tau
            logp_w = -0.5 * ((mu[:n_w] * mu[:n_w] + var[:n_w]) * inv_s0_sq).sum()
            elbo = ell.sum() / n_mc + logp_w + sig.log().sum() + const
            loss = -elbo / n
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            total += loss.item() * nb
        curve[epoch] = total / n
    with torch.no_grad():
        mu_out = mu.detach().numpy().copy()
        sigma = F.softplus(rho).numpy().copy()
    fit_time = time.perf_counter() - start
    return TorchBBB(mu_out, sigma, sizes, y_mean, y_sd, fit_time, curve)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=["boston", "synthetic"], default="boston")
    parser.add_argument("--rows", type=int, default=50_000, help="synthetic rows (10%% test)")
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=700)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--n-mc", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--fused", action="store_true", help="Adam(fused=True)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import torch
    from compare_vi import load_case

    (X_train, y_train, X_test, y_test), facts = load_case(args.case, args.rows, None)
    fit = train_bbb(
        X_train, y_train, hidden=args.hidden, epochs=args.epochs, batch_size=args.batch_size,
        lr=args.lr, n_mc=args.n_mc, seed=args.seed, n_threads=args.threads, fused=args.fused,
    )  # fmt: skip
    draws = elbo_draws(fit.mu, fit.sigma, fit.sizes, X_train, y_train, fit.y_mean, fit.y_sd)
    row_ll = predictive_log_density(sample_q(fit.mu, fit.sigma, 100), fit.sizes, X_test,
                                    y_test, fit.y_mean, fit.y_sd)  # fmt: skip
    record = {
        "peer": "torch", "torch": torch.__version__, **vars(args), **facts,
        "fit_time": fit.fit_time, "elbo": float(draws.mean()),
        "elbo_se": float(draws.std(ddof=1) / math.sqrt(draws.size)),
        "test_ll": float(row_ll.mean()),
        "test_ll_se": float(row_ll.std(ddof=1) / math.sqrt(row_ll.size)),
        "loss_first_epoch": float(fit.loss_curve[0]),
        "loss_last_epoch": float(fit.loss_curve[-1]),
    }  # fmt: skip
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
