"""The skbnn deep ensemble (heteroscedastic regression) in PyTorch on CPU, for same-machine timing.

Same model and training as ``BayesianMLPRegressor(hidden_layer_sizes=(hidden,),
activation="relu", n_samples=M, method=DeepEnsemble(solver="adam", heteroscedastic=True,
max_iter=epochs, batch_size=B, learning_rate_init=lr))``:

* X as given (standardize it first); y standardized with its training mean and population sd,
  predictions returned in y's original units. float64 throughout.
* A ``d -> hidden (ReLU) -> 2`` network (``hidden`` one width or a tuple of widths, one
  ReLU layer each): output 0 is the mean, output 1 a raw variance,
  ``var = softplus(raw) + 1e-6``.
* scikit-learn's initialization: every weight and bias ~ Uniform(-a, a) with
  ``a = sqrt(6 / (fan_in + fan_out))`` of its layer, drawn independently per member.
* Per minibatch of B rows, the loss is the batch mean of the Gaussian negative log-likelihood
  (constant included) plus ``(1/n) sum theta^2 / (2 s^2)``, the N(0, s^2) prior with
  ``s = 1/sqrt(fan_in)`` for weights and ``s = 1`` for biases (n = training rows).
* ``torch.optim.Adam`` with its defaults (betas 0.9/0.999, eps 1e-8) at a constant learning
  rate; every epoch a fresh permutation, cut into consecutive batches of B, the last partial
  batch included. The prior enters as Adam's (coupled, L2) ``weight_decay`` per parameter,
  ``1 / (n s^2)``: torch adds ``weight_decay * theta`` to the gradient before the moment
  updates, which is exactly the gradient of the prior term, without a dozen extra autograd
  nodes per step.
* The M members are trained one after another, each from its own seed (children of
  ``SeedSequence(seed)``), on ``n_threads`` intra-op threads.

The ensemble's predictive is the equally weighted mixture of the members' Gaussians.
Needs torch (CPU build: ``pip install torch --index-url https://download.pytorch.org/whl/cpu``).
Standalone use, on the synthetic set of ``benchmarks/compare_ensemble.py``::

    python benchmarks/peers/torch_ensemble.py --rows 50000 --members 5 --epochs 40
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


@dataclass
class TorchEnsemble:
    """A trained ensemble: per-member parameters, y's scaling, timings and loss curves."""

    members: list  # per member: [W1, b1, W2, b2, ...] torch tensors, W of shape (fan_in, fan_out)
    y_mean: float
    y_sd: float
    fit_time: float  # wall seconds for all members (initialization and training)
    member_times: list = field(default_factory=list)
    loss_curves: np.ndarray | None = None  # (M, epochs): the loss of each epoch

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each member's predictive mean and variance per row in y's original units.

        Returns ``(means, variances)``, each of shape ``(n_members, n_rows)``.
        """
        import torch

        Xt = torch.as_tensor(np.ascontiguousarray(X, dtype=np.float64))
        means, variances = [], []
        with torch.no_grad():
            for params in self.members:
                mu, var = _forward(Xt, params)
                means.append(mu.numpy() * self.y_sd + self.y_mean)
                variances.append(var.numpy() * self.y_sd**2)
        return np.array(means), np.array(variances)


def _forward(X, params):
    """Mean and variance (standardized scale) of one member on the rows of X."""
    import torch
    import torch.nn.functional as F

    out = X
    for i in range(0, len(params) - 2, 2):
        out = torch.relu(torch.addmm(params[i + 1], out, params[i]))
    out = torch.addmm(params[-1], out, params[-2])
    return out[:, 0], F.softplus(out[:, 1]) + 1e-6


def _layer_sizes(d: int, hidden) -> list:
    """``[d, *hidden, 2]`` for ``hidden`` an int (one layer) or a tuple of widths."""
    return [d, *((hidden,) if isinstance(hidden, int) else hidden), 2]


def _init_member(d: int, hidden, generator) -> list:
    """scikit-learn's MLP initialization, biases included, as leaf tensors."""
    import torch

    params = []
    sizes = _layer_sizes(d, hidden)
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        a = math.sqrt(6.0 / (fan_in + fan_out))
        for shape in ((fan_in, fan_out), (fan_out,)):
            t = torch.empty(shape, dtype=torch.float64).uniform_(-a, a, generator=generator)
            params.append(t.requires_grad_())
    return params


def train_ensemble(
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_members: int = 5,
    hidden: int | tuple = 50,
    epochs: int = 40,
    batch_size: int = 100,
    lr: float = 0.01,
    seed: int = 0,
    n_threads: int = 2,
    fused: bool = False,
) -> TorchEnsemble:
    """Train the heteroscedastic deep ensemble; see the module docstring for the model.

    Parameters
    ----------
    X : ndarray of shape (n, d)
        Features, used as given.
    y : ndarray of shape (n,)
        Targets in original units (standardized inside).
    n_members, hidden, epochs, batch_size, lr : int, int, int, int, float
        Members M, hidden ReLU units (an int, or a tuple of layer widths), passes over
        the data, minibatch rows B, Adam's constant learning rate.
    seed : int
        Root of the members' seeds (``SeedSequence(seed).spawn(n_members)``).
    n_threads : int
        ``torch.set_num_threads``.
    fused : bool
        Adam's fused CPU implementation (the same arithmetic in one kernel per step; torch's
        default is the per-tensor loop).

    Returns
    -------
    TorchEnsemble
        With ``predict(X) -> (means, variances)`` of shape ``(M, n_rows)`` in original
        units, ``fit_time`` (wall seconds) and ``loss_curves`` ``(M, epochs)`` (mean minibatch
        NLL of each epoch plus the prior term / n at its end).
    """
    import torch

    torch.set_num_threads(n_threads)
    start = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    n, d = X.shape
    y_mean, y_sd = float(y.mean()), float(y.std())
    Xt = torch.from_numpy(X)
    yt = torch.from_numpy((y - y_mean) / y_sd)
    # gradient of sum theta^2 / (2 s^2 n) is theta / (s^2 n): s^2 = 1/fan_in for weights,
    # 1 for biases
    decay = [v for fan_in in _layer_sizes(d, hidden)[:-1] for v in (fan_in / n, 1.0 / n)]
    members, member_times = [], []
    curves = np.zeros((n_members, epochs))
    for m, child in enumerate(np.random.SeedSequence(seed).spawn(n_members)):
        t0 = time.perf_counter()
        gen = torch.Generator().manual_seed(int(child.generate_state(1)[0]))
        params = _init_member(d, hidden, gen)
        groups = [{"params": [p], "weight_decay": wd} for p, wd in zip(params, decay, strict=True)]
        opt = torch.optim.Adam(groups, lr=lr, fused=fused or None)
        for epoch in range(epochs):
            # one gather per epoch; the batches are then contiguous views
            perm = torch.randperm(n, generator=gen)
            Xp, yp = Xt[perm], yt[perm]
            total = 0.0
            for lo in range(0, n, batch_size):
                xb, yb = Xp[lo : lo + batch_size], yp[lo : lo + batch_size]
                mu, var = _forward(xb, params)
                nll = 0.5 * (LOG_2PI + torch.log(var) + (yb - mu) ** 2 / var)
                loss = nll.mean()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += loss.item() * xb.shape[0]
            with torch.no_grad():
                # the prior term at the epoch's end (it moves little within an epoch)
                sq = [float((p * p).sum()) for p in params]
                prior = 0.5 * float(np.dot(sq, decay))
            curves[m, epoch] = total / n + prior
        members.append([p.detach() for p in params])
        member_times.append(time.perf_counter() - t0)
    fit_time = time.perf_counter() - start
    return TorchEnsemble(members, y_mean, y_sd, fit_time, member_times, curves)


def mixture_scores(means: np.ndarray, variances: np.ndarray, y: np.ndarray) -> dict:
    """RMSE of the mixture mean, and the mean / standard error over rows of the log mixture
    density, for member means and variances of shape ``(M, n)`` in y's units."""
    logp = -0.5 * (LOG_2PI + np.log(variances) + (y - means) ** 2 / variances)
    row_ll = logsumexp(logp, axis=0) - np.log(len(means))
    return {
        "rmse": float(np.sqrt(np.mean((means.mean(0) - y) ** 2))),
        "test_ll": float(row_ll.mean()),
        "test_ll_se": float(row_ll.std(ddof=1) / np.sqrt(len(row_ll))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=50_000, help="synthetic rows (10%% test)")
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--hidden", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--fused", action="store_true", help="Adam(fused=True)")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import torch
    from compare_ensemble import synthetic_split

    X_train, y_train, X_test, y_test, oracle = synthetic_split(args.rows)
    ens = train_ensemble(
        X_train, y_train, n_members=args.members, hidden=args.hidden, epochs=args.epochs,
        batch_size=args.batch_size, lr=args.lr, seed=args.seed, n_threads=args.threads,
        fused=args.fused,
    )  # fmt: skip
    record = {"peer": "torch", "torch": torch.__version__, **vars(args),
              "fit_time": ens.fit_time, "member_times": ens.member_times}  # fmt: skip
    record.update(mixture_scores(*ens.predict(X_test), y_test))
    record.update(oracle)
    record["loss_first_epoch"] = ens.loss_curves[:, 0].tolist()
    record["loss_last_epoch"] = ens.loss_curves[:, -1].tolist()
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
