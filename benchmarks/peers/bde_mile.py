"""The peer ``sklearn-contrib-bde`` (MILE: a deep ensemble, then MCLMC from each member).

Sommer et al. (ICLR 2025), "Microcanonical Langevin Ensembles". ``bde.BdeRegressor``
trains ``n_members`` heteroscedastic networks (output 0 the mean, output 1 a raw scale,
``sigma = softplus(raw) + 1e-6``) with Adam on the Gaussian NLL, early-stopped on a
``validation_split`` of the training rows, then runs an MCLMC chain from each member
(``warmup_steps`` of step-size and mass adaptation, then ``n_samples`` steps kept every
``n_thinning``-th) under a standard-normal prior on every weight, on all training rows.
bde does not scale y; as in its README, y is standardized here with the training mean
and population sd, and the predictive is mapped back to y's original units.

The predictive is the equally weighted mixture of one Gaussian per kept draw and member
(``predict(x, raw=True)``: ``(members, draws, rows, 2)``), returned by
:meth:`BdeFit.predict_mixture` in the shape of skbnn's ``predict_mixture`` so that
``skbnn.metrics`` scores both alike. bde runs in float32, as shipped.

Needs ``pip install sklearn-contrib-bde`` (JAX; in its own venv, it pins blackjax). Set
``XLA_FLAGS=--xla_force_host_platform_device_count=N`` before JAX is imported: members
are spread over the N host devices. Standalone use, one UCI split::

    python benchmarks/peers/bde_mile.py --dataset yacht --split 0
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# The README's regression example (bde 1.0.2), every setting that differs from a default.
README = {
    "hidden_layers": [16, 16],
    "n_members": 8,
    "epochs": 200,
    "validation_split": 0.15,
    "lr": 1e-3,
    "weight_decay": 1e-4,
    "warmup_steps": 5000,
    "n_samples": 2000,
    "n_thinning": 2,
    "patience": 10,
}
# For smoke tests only: the same pipeline, seconds instead of minutes.
QUICK = {**README, "hidden_layers": [4], "n_members": 2, "epochs": 5, "warmup_steps": 20,
         "n_samples": 20, "n_thinning": 2, "patience": 2}  # fmt: skip
SETTINGS = {"readme": README, "quick": QUICK}


def _bde():
    """The bde package, also when ``benchmarks/`` (whose driver is ``bde.py``) is on the path."""
    import importlib

    here = Path(__file__).resolve().parents[1]
    saved = sys.path[:]
    sys.path[:] = [p for p in saved if Path(p or ".").resolve() != here]
    try:
        return importlib.import_module("bde")
    finally:
        sys.path[:] = saved


def available() -> bool:
    """Whether bde and JAX import here."""
    try:
        import jax  # noqa: F401

        return hasattr(_bde(), "BdeRegressor")
    except ImportError:
        return False


@dataclass
class BdeFit:
    """A fitted ``BdeRegressor`` with y's scaling and the fit's wall time."""

    model: object
    y_mean: float
    y_sd: float
    fit_time: float
    settings: dict = field(default_factory=dict)

    def raw(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Component means and sds on the standardized scale, ``(rows, members * draws)``."""
        import jax

        out = np.asarray(self.model.predict(np.asarray(X, dtype=np.float32), raw=True))
        mu = out[..., 0]
        sd = np.asarray(jax.nn.softplus(out[..., 1])) + 1e-6  # bde's own link
        e, t, n = mu.shape
        return (mu.reshape(e * t, n).T.astype(np.float64),
                sd.reshape(e * t, n).T.astype(np.float64))  # fmt: skip

    def predict_mixture(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(means, stds, weights)`` in y's units, as skbnn's ``predict_mixture``."""
        mu, sd = self.raw(X)
        weights = np.full(mu.shape[1], 1.0 / mu.shape[1])
        return mu * self.y_sd + self.y_mean, sd * self.y_sd, weights

    def _members(self) -> list:
        return list(getattr(self.model._bde, "members", None) or [])

    def predict_mixture_members(self, X: np.ndarray):
        """The same for the deep ensemble MCLMC started from: one component per trained
        member (bde keeps the members' trained parameters beside the draws); None when bde
        did not keep them (``patience=None``)."""
        import jax

        members = self._members()
        if not members or any(m.params is None for m in members):
            return None
        X = np.asarray(X, dtype=np.float32)
        out = np.stack([np.asarray(m.forward(m.params, X)) for m in members])
        mu, sd = out[..., 0].T, np.asarray(jax.nn.softplus(out[..., 1])).T + 1e-6
        weights = np.full(mu.shape[1], 1.0 / mu.shape[1])
        return (mu.astype(np.float64) * self.y_sd + self.y_mean,
                sd.astype(np.float64) * self.y_sd, weights)  # fmt: skip


def fit(X: np.ndarray, y: np.ndarray, settings: dict | None = None, seed: int = 0) -> BdeFit:
    """Fit ``BdeRegressor(**settings)`` (README's by default) on standardized ``X`` and raw
    ``y`` (standardized here, as in bde's README)."""
    bde = _bde()
    from bde.loss import GaussianNLL

    settings = dict(README if settings is None else settings)
    y = np.asarray(y, dtype=np.float64).ravel()
    y_mean, y_sd = float(y.mean()), float(y.std()) + 1e-8
    model = bde.BdeRegressor(loss=GaussianNLL(), seed=seed, **settings)
    start = time.perf_counter()
    model.fit(np.asarray(X, dtype=np.float32),
              ((y - y_mean) / y_sd).astype(np.float32).reshape(-1, 1))  # fmt: skip
    fit_time = time.perf_counter() - start
    return BdeFit(model, y_mean, y_sd, fit_time, settings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="yacht")
    parser.add_argument("--split", type=int, default=0)
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--settings", default="readme", choices=sorted(SETTINGS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _uci import load_split, standardize

    from skbnn.metrics import log_predictive_density

    X_train, y_train, X_test, y_test = load_split(args.dataset, args.split, args.data_dir)
    X_train, X_test = standardize(X_train, X_test)
    result = fit(X_train, y_train, SETTINGS[args.settings], seed=args.seed)
    means, stds, weights = result.predict_mixture(X_test)
    rmse = float(np.sqrt(np.mean((means @ weights - y_test) ** 2)))
    ll = log_predictive_density(y_test, means, stds, weights)
    print(json.dumps({"peer": "bde", **vars(args), "fit_time": result.fit_time, "rmse": rmse,
                      "test_ll": ll}))  # fmt: skip


if __name__ == "__main__":
    main()
