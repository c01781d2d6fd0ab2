"""One epoch of skbnn's MNIST networks in PyTorch on CPU, for same-run timing.

The network of ``benchmarks/mnist.py``: MNIST's first ``--rows`` training images (pixels
in [0, 1], used as given), a ``784 -> 400 -> 600 -> 10`` ReLU classifier with a softmax
likelihood, Adam at a constant learning rate, batches of B rows; the epoch is a fresh
permutation cut into consecutive batches of B, the last partial batch included. The prior
is ``BayesianMLPClassifier``'s default, ``GaussianPrior(std=3)``: weights ~ N(0, 9 /
fan_in), biases ~ N(0, 9) (:func:`torch_bbb.prior_std` times 3). Two models, each as skbnn
fits it with ``BayesianMLPClassifier(hidden_layer_sizes=(400, 600), activation="relu",
method=...)``:

* ``vi``: ``VariationalInference(batch_size=B, max_iter=1, tol=0)``, Bayes by Backprop as
  ``torch_bbb.py`` has it, without the noise (a classifier has none). ``q`` is mean-field
  Gaussian over the weights and biases, ``sigma = softplus(rho)``; means start as
  scikit-learn's MLP initializes (``U(-a, a)``, ``a = sqrt(6 / (fan_in + fan_out))``,
  biases too), every ``sigma`` at ``init_std``. Each step ascends ``(n / B) loglik_B +
  E_q[log p(w)] + H[q]`` (the prior term and the entropy in closed form), the minibatch's
  expected log-likelihood by the local reparameterization trick: every layer's
  pre-activations drawn per row from ``N(a mu_W + mu_b, a^2 sigma_W^2 + sigma_b^2)``,
  ``n_mc`` draws per step, averaged. The loss is minus that over ``n``, so Adam's step is
  skbnn's. ``q``'s means and rhos are one flat tensor each (two tensors for Adam), the
  layers views of them.
* ``mlp``: ``DeepEnsemble(solver="adam", learning_rate="constant", batch_size=B,
  max_iter=1, early_stopping=False)`` with one member (``n_samples=1``): the MAP network.
  Per batch, the mean softmax cross-entropy plus ``(1/n) sum theta^2 / (2 s^2)``, the prior
  entering as Adam's per-tensor (coupled, L2) ``weight_decay`` of ``1 / (n s^2)``, as in
  ``torch_ensemble.py``; weights and biases as six leaf tensors, what a PyTorch user's
  ``nn.Linear`` layers hold.

``torch.optim.Adam`` with its defaults (betas 0.9/0.999, eps 1e-8). Each model runs in
float64 (skbnn's precision: the like-for-like time) and float32 (what a PyTorch user would
run) on ``--threads`` intra-op threads. First one pass over ``WARM_ROWS`` rows of each
(model, dtype) warms torch up (its allocator, its kernels' first calls); then each of
``--repeats`` epochs starts from fresh parameters and Adam state (seed ``seed + repeat``).
An epoch's time runs from the permutation to the last step's update: the parameters and
Adam's state are made before it (they take milliseconds, as the initialization inside
skbnn's ``diagnostics_["train_time"]`` does).

One JSON line per (model, dtype): the epoch's wall and process CPU seconds per repeat (CPU
over wall is the cores busy), the machine's one-minute load average before them, and
the epoch's loss per row, constants included, as skbnn's
``diagnostics_["loss_curve"]`` has it. The MLP's holds the prior term at the epoch's end,
as ``torch_ensemble.py`` records it (Adam's ``weight_decay`` leaves it out of the steps'
losses), where skbnn's averages it over the steps: on the first epoch that term falls
fast (weights on the always-blank pixels decay at Adam's full step), so the MLP's loss
here is a few nats per row below skbnn's; with the prior taken at every step the two
agreed to 0.01 on 2,000 rows. Needs torch (CPU build) and scipy (for ``torch_bbb``);
``benchmarks/mnist_epoch.py`` runs this beside skbnn::

    python benchmarks/peers/torch_mnist.py --rows 60000 --repeats 3 --threads 2
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from torch_bbb import LOG_2PI, _inverse_softplus, prior_std  # noqa: E402

#: The network of ``benchmarks/mnist.py``.
HIDDEN = (400, 600)
N_CLASSES = 10
#: ``BayesianMLPClassifier``'s ``prior="gaussian"``: ``GaussianPrior(std=3)``.
PRIOR_STD = 3.0
#: Rows of the untimed warm-up pass of each (model, dtype).
WARM_ROWS = 500
MODELS = ("vi", "mlp")
DTYPES = ("float64", "float32")


def _views(t, sizes) -> list:
    """``[(W, b), ...]`` views of a flat tensor in skbnn's layout, ``W`` (fan_in, fan_out).

    One ``split``: its backward writes the pieces' gradients into one flat tensor, where
    a slice per piece would fill a zero tensor the size of ``t`` for each."""
    import torch

    shapes = [s for a, b in zip(sizes[:-1], sizes[1:], strict=True) for s in ((a, b), (b,))]
    pieces = torch.split(t, [math.prod(s) for s in shapes])
    views = [piece.view(shape) for piece, shape in zip(pieces, shapes, strict=True)]
    return list(zip(views[::2], views[1::2], strict=True))


def _glorot(sizes, dtype, generator) -> list:
    """scikit-learn MLP's initialization, ``[W1, b1, W2, b2, ...]``, biases included."""
    import torch

    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        a = math.sqrt(6.0 / (fan_in + fan_out))
        for shape in ((fan_in, fan_out), (fan_out,)):
            params.append(torch.empty(shape, dtype=dtype).uniform_(-a, a, generator=generator))
    return params


def _generator(seed: int):
    import torch

    return torch.Generator().manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))


def vi_epoch(X, y, *, hidden=HIDDEN, n_classes: int = N_CLASSES, batch_size: int = 100,
             lr: float = 1e-3, n_mc: int = 1, init_std: float = 0.01, prior: float = PRIOR_STD,
             seed: int = 0, fused: bool = False) -> dict:  # fmt: skip
    """One epoch of Bayes by Backprop from a fresh ``q``; see the module docstring.

    Parameters
    ----------
    X : torch.Tensor of shape (n, d)
        Features, in the dtype to train in.
    y : torch.Tensor of shape (n,)
        Class labels 0 .. n_classes - 1 (int64).
    hidden, n_classes : tuple, int
        Hidden ReLU widths, outputs.
    batch_size, lr, n_mc, init_std, prior : int, float, int, float, float
        Minibatch rows B, Adam's learning rate, draws per step, the
        initial ``sigma``, the prior's ``std`` (before fan-in scaling).
    seed : int
        Seeds torch's generator (initialization, permutation and draws).
    fused : bool
        Adam's fused CPU implementation.

    Returns
    -------
    dict
        ``epoch_time`` and ``cpu_time`` (seconds, wall and process CPU) and ``loss``
        (minus the epoch's ELBO estimate per row, as skbnn's ``loss_curve``).
    """
    import torch
    import torch.nn.functional as F

    dtype = X.dtype
    n, d = X.shape
    sizes = (d, *hidden, n_classes)
    gen = _generator(seed)
    s0 = prior * prior_std(sizes)
    p = s0.size
    mu = torch.cat([t.ravel() for t in _glorot(sizes, dtype, gen)]).requires_grad_()
    rho = torch.full((p,), _inverse_softplus(init_std), dtype=dtype).requires_grad_()
    inv_s0_sq = torch.from_numpy(1.0 / s0**2).to(dtype)
    # E_q[log p(w)]'s constant and H[q]'s
    const = -float(np.log(s0).sum()) - 0.5 * p * LOG_2PI + 0.5 * p * (1.0 + LOG_2PI)
    opt = torch.optim.Adam([mu, rho], lr=lr, fused=fused or None)
    last = len(sizes) - 2

    wall, cpu = time.perf_counter(), time.process_time()
    perm = torch.randperm(n, generator=gen)
    Xp, yp = X[perm], y[perm]
    total = 0.0
    for lo in range(0, n, batch_size):
        xb, yb = Xp[lo : lo + batch_size], yp[lo : lo + batch_size]
        nb = xb.shape[0]
        sig = F.softplus(rho)
        var = sig * sig
        means, variances = _views(mu, sizes), _views(var, sizes)
        ll = 0.0
        for _ in range(n_mc):
            h = xb
            for i, ((mw, mb), (vw, vb)) in enumerate(zip(means, variances, strict=True)):
                m = torch.addmm(mb, h, mw)
                v = torch.addmm(vb, h * h, vw)
                h = m + v.sqrt() * torch.randn(m.shape, generator=gen, dtype=dtype)
                if i < last:
                    h = torch.relu(h)
            ll = ll - F.cross_entropy(h, yb, reduction="sum")
        logp_w = -0.5 * ((mu * mu + var) * inv_s0_sq).sum()
        elbo = (n / nb) * ll / n_mc + logp_w + sig.log().sum() + const
        loss = -elbo / n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.item() * nb / n
    return {"epoch_time": time.perf_counter() - wall, "cpu_time": time.process_time() - cpu,
            "loss": total}  # fmt: skip


def mlp_epoch(X, y, *, hidden=HIDDEN, n_classes: int = N_CLASSES, batch_size: int = 100,
              lr: float = 1e-3, prior: float = PRIOR_STD, seed: int = 0,
              fused: bool = False) -> dict:  # fmt: skip
    """One epoch of the MAP network (skbnn's one-member deep ensemble) from a fresh start.

    Parameters as :func:`vi_epoch`'s (without ``n_mc`` and ``init_std``).

    Returns
    -------
    dict
        ``epoch_time``, ``cpu_time`` and ``loss``: the epoch's mean minibatch
        cross-entropy plus the prior's negative log density over ``n`` at the epoch's end,
        constants included (skbnn's ``loss_curve``).
    """
    import torch
    import torch.nn.functional as F

    dtype = X.dtype
    n, d = X.shape
    sizes = (d, *hidden, n_classes)
    gen = _generator(seed)
    params = [t.requires_grad_() for t in _glorot(sizes, dtype, gen)]
    # the gradient of theta^2 / (2 s^2 n): s^2 = prior^2 / fan_in for weights, prior^2 for
    # biases
    decay = [v for fan_in in sizes[:-1] for v in (fan_in / (n * prior**2), 1.0 / (n * prior**2))]
    groups = [{"params": [t], "weight_decay": wd} for t, wd in zip(params, decay, strict=True)]
    opt = torch.optim.Adam(groups, lr=lr, fused=fused or None)
    s0 = prior * prior_std(sizes)
    const = float(np.log(s0).sum()) + 0.5 * s0.size * LOG_2PI

    wall, cpu = time.perf_counter(), time.process_time()
    perm = torch.randperm(n, generator=gen)
    Xp, yp = X[perm], y[perm]
    total = 0.0
    for lo in range(0, n, batch_size):
        xb, yb = Xp[lo : lo + batch_size], yp[lo : lo + batch_size]
        h = xb
        for i in range(0, len(params) - 2, 2):
            h = torch.relu(torch.addmm(params[i + 1], h, params[i]))
        loss = F.cross_entropy(torch.addmm(params[-1], h, params[-2]), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total += loss.item() * xb.shape[0] / n
    epoch_time, cpu_time = time.perf_counter() - wall, time.process_time() - cpu
    with torch.no_grad():
        sq = [float((t * t).sum()) for t in params]
    prior_term = 0.5 * float(np.dot(sq, decay))
    return {"epoch_time": epoch_time, "cpu_time": cpu_time,
            "loss": total + prior_term + const / n}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=60_000, help="the first ROWS images")
    parser.add_argument("--repeats", type=int, default=3, help="timed epochs per line")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--dtypes", nargs="+", choices=DTYPES, default=list(DTYPES))
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--n-mc", type=int, default=1)
    parser.add_argument("--init-std", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads")
    parser.add_argument("--fused", action="store_true", help="Adam(fused=True)")
    parser.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import torch
    from _mnist import load_mnist
    from _uci import emitter, machine

    torch.set_num_threads(args.threads)
    X, y = load_mnist(args.data_dir)[:2]
    X, y = X[: args.rows], y[: args.rows]
    yt = torch.from_numpy(y)
    emit = emitter(args.out)
    settings = {"rows": len(X), "hidden": list(HIDDEN), "batch_size": args.batch_size,
                "lr": args.lr, "prior_std": PRIOR_STD, "threads": args.threads,
                "fused": args.fused}  # fmt: skip
    for dtype in args.dtypes:
        Xt = torch.from_numpy(X).to(getattr(torch, dtype))
        for model in args.models:
            if model == "vi":
                extra = {"n_mc": args.n_mc, "init_std": args.init_std}
                run = vi_epoch
            else:
                extra = {}
                run = mlp_epoch
            common = {"batch_size": args.batch_size, "lr": args.lr, "fused": args.fused, **extra}
            run(Xt[:WARM_ROWS], yt[:WARM_ROWS], seed=args.seed, **common)
            load = os.getloadavg()[0]
            runs = [run(Xt, yt, seed=args.seed + r, **common) for r in range(args.repeats)]
            times = [r["epoch_time"] for r in runs]
            emit({"library": "torch", "model": model, "dtype": dtype, **settings, **extra,
                  "epoch_time_median": statistics.median(times), "epoch_time_min": min(times),
                  "epoch_times": times, "cpu_times": [r["cpu_time"] for r in runs],
                  "losses": [r["loss"] for r in runs], "load_average_1min": load,
                  "torch": torch.__version__, **machine()})  # fmt: skip


if __name__ == "__main__":
    main()
