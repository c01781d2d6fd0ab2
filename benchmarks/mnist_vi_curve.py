"""VI on MNIST: the posterior-mean network's test and train accuracy after every epoch.

Seed 003's network (784-400-600-10 ReLU, batches of 100) fitted by
``VariationalInference``; after each epoch the mean network scores the 10,000 test images
and a fixed 10,000-row subset of the training images, with the median and mean posterior
sd, one JSON line per epoch on stdout and the run's line (its curve) appended to
``--out``. It wraps the VI module's per-epoch hook and start to read the variational
parameters as they train, so it measures the library's own training loop. What
doc/optimization.md's VI table ran (one core each):

    python benchmarks/mnist_vi_curve.py --epochs 10 --tag A_default
    python benchmarks/mnist_vi_curve.py --epochs 10 --prior-std 1 --no-fan-in --tag B_n01
    python benchmarks/mnist_vi_curve.py --epochs 10 --init-std 1e-4 --tag C_default_init1e-4
    python benchmarks/mnist_vi_curve.py --epochs 10 --prior-std 1 --no-fan-in --lr 1e-4 \
        --tag D_n01_lr1e-4
    python benchmarks/mnist_vi_curve.py --epochs 10 --sw 10 --tag E_default_kl0.1
    python benchmarks/mnist_vi_curve.py --epochs 10 --lr 1e-4 --tag F_default_lr1e-4
    python benchmarks/mnist_vi_curve.py --epochs 250 --final --prior-std 1 --no-fan-in \
        --init-std 1.234e-4 --lr 1e-4 --schedule step --tag LONG_ref_n01_rho-9_lr1e-4_step

The table is the report of the results file (no fit)::

    python benchmarks/mnist_vi_curve.py --report benchmarks/results/mnist_vi_curve.jsonl
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mnist import load_mnist  # noqa: E402

#: the runs' names in the table, by their ``--tag``
LABELS = {
    "A_default": "A: the defaults",
    "B_n01": "B",
    "C_default_init1e-4": "C",
    "D_n01_lr1e-4": "D",
    "F_default_lr1e-4": "F",
    "E_default_kl0.1": "E: KL weighted 0.1 (diagnostic)",
    "LONG_ref_n01_rho-9_lr1e-4_step": "reference protocol",
}


def _number(x: float) -> str:
    """0.01 as is, 1.234e-4 as 1.2e-4."""
    if x >= 0.01:
        return f"{x:g}"
    mantissa, exponent = f"{x:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def report(path) -> str:
    """doc/optimization.md's table of the results file ``path``, in the order of LABELS (a
    later run of a tag replaces an earlier one): the last epoch's scores and median sd,
    which is "rising" where the last epoch raised it, and the best test epoch."""
    runs = {}
    for line in Path(path).read_text().splitlines():
        r = json.loads(line)
        runs[r["tag"]] = r
    head = ("| run | prior | Adam rate | initial sd | epochs | test, mean network | train | "
            "median sd at the end | best test (epoch) |")  # fmt: skip
    out = [head, "|---|---|---|---|---|---|---|---|---|"]
    for tag, label in LABELS.items():
        if tag not in runs:
            continue
        r, a = runs[tag], runs[tag]["args"]
        curve = r["curve"]
        if a["no_fan_in"]:
            prior = f"N(0, {a['prior_std']:g})"
        else:
            prior = f"sd {a['prior_std']:g} / sqrt(fan-in)"
        rate = _number(a["lr"])
        if a.get("schedule", "constant") != "constant":
            rate += f', `"{a["schedule"]}"`'
        test = f"{100 * r['final_test_mean']:.2f}"
        if "test_averaged" in r:
            test += f" (averaged {100 * r['test_averaged']:.2f}, log loss {r['log_loss']:.3f})"
        sd = curve[-1]["sigma_med"]
        sd_cell = f"{sd:.3f}" if sd >= 0.1 else f"{sd:.2g}"
        if len(curve) > 1 and sd > 1.01 * curve[-2]["sigma_med"]:
            sd_cell += ", rising"
        best = max(curve, key=lambda e: e["test"])
        cells = [label, prior, rate, _number(a["init_std"]), str(a["epochs"]), test,
                 f"{100 * r['final_train_mean']:.2f}", sd_cell,
                 f"{100 * best['test']:.2f} ({best['epoch']})"]  # fmt: skip
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def mean_acc(theta, layout, XX, yy):
    coefs, ints = layout.unpack(theta)
    h = XX
    for i, (w, b) in enumerate(zip(coefs, ints, strict=True)):
        h = h @ w + b
        if i < len(coefs) - 1:
            h = np.maximum(h, 0)
    return float(np.mean(h.argmax(1) == yy))


def main() -> None:
    import skbnn.methods.vi as vi
    from skbnn import BayesianMLPClassifier
    from skbnn.methods import VariationalInference
    from skbnn.priors import GaussianPrior

    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--prior-std", type=float, default=3.0)
    p.add_argument("--no-fan-in", action="store_true")
    p.add_argument("--init-std", type=float, default=0.01)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--local", default="auto")
    p.add_argument("--n-mc", type=int, default=1)
    p.add_argument(
        "--sw", type=float, default=1.0, help="diagnostic: sample_weight, i.e. KL weight 1/sw"
    )
    p.add_argument("--schedule", default="constant")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tag", default="")
    p.add_argument("--out", default="benchmarks/results/mnist_vi_curve.jsonl")
    p.add_argument("--data-dir", default=None, help="default: ../shared/data/mnist")
    p.add_argument("--final", action="store_true", help="also model-averaged accuracy and log loss")
    p.add_argument("--report", default=None, metavar="FILE",
                   help="print the table of this results file (no fit)")  # fmt: skip
    a = p.parse_args()
    if a.report:
        print(report(a.report), end="")
        return

    X, y, Xt, yt = load_mnist(a.data_dir)
    if a.rows:
        X, y = X[: a.rows], y[: a.rows]
    sub = np.random.default_rng(1).choice(len(X), min(10000, len(X)), replace=False)
    Xs, ys = X[sub], y[sub]
    state = {}

    orig_start = vi.VariationalInference._start

    def _start(self, target, rng, vcfg):
        v = orig_start(self, target, rng, vcfg)
        if target.n_rows == len(X):  # not the warm-up fit that compiles
            state["v"], state["layout"], state["p"] = v, target.layout, target.n_params
        return v

    vi.VariationalInference._start = _start
    orig_rec = vi.record_epoch
    curve = []
    t0 = [time.perf_counter()]

    def rec(member, loss, n, bar):
        ok = orig_rec(member, loss, n, bar)
        if "v" in state:
            v, p_ = state["v"], state["p"]
            te = mean_acc(v[:p_], state["layout"], Xt, yt)
            tr = mean_acc(v[:p_], state["layout"], Xs, ys)
            sig = np.logaddexp(0, v[p_ : 2 * p_])
            row = dict(
                epoch=len(curve) + 1,
                loss=loss,
                test=te,
                train=tr,
                sigma_med=float(np.median(sig)),
                sigma_mean=float(sig.mean()),
                mu_rms=float(np.sqrt(np.mean(v[:p_] ** 2))),
                t=time.perf_counter() - t0[0],
            )
            curve.append(row)
            print(json.dumps(row), flush=True)
        return ok

    vi.record_epoch = rec

    prior = GaussianPrior(std=a.prior_std, fan_in_scaling=not a.no_fan_in)
    local = {"auto": "auto", "1": True, "0": False}[a.local]
    m = VariationalInference(
        max_iter=a.epochs,
        batch_size=100,
        learning_rate_init=a.lr,
        init_std=a.init_std,
        learning_rate=a.schedule,
        local_reparameterization=local,
        n_mc=a.n_mc,
        elbo_samples=2 if not a.final else 20,
    )
    clf = BayesianMLPClassifier(
        (400, 600),
        activation="relu",
        method=m,
        prior=prior,
        random_state=a.seed,
        n_samples=100 if a.final else 10,
        n_jobs=1,
    )
    t0[0] = time.perf_counter()
    clf.fit(X, y, sample_weight=None if a.sw == 1.0 else np.full(len(y), a.sw))
    fit = time.perf_counter() - t0[0]
    res = dict(
        tag=a.tag,
        args=vars(a),
        fit_time=fit,
        final_test_mean=curve[-1]["test"],
        final_train_mean=curve[-1]["train"],
        curve=curve,
    )
    if a.final:
        from sklearn.metrics import log_loss

        pr = clf.predict_proba(Xt)
        res["test_averaged"] = float(np.mean(clf.classes_[pr.argmax(1)] == yt))
        res["log_loss"] = float(log_loss(yt, pr, labels=clf.classes_))
        res["elbo"] = float(clf.elbo_)
    with open(a.out, "a") as f:
        f.write(json.dumps(res) + "\n")
    print("DONE", json.dumps({k: v for k, v in res.items() if k != "curve"}))


if __name__ == "__main__":
    main()
