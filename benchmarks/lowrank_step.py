"""Where a step of LBBNN's low-rank family goes, on MNIST's network: its parts, timed alone.

The family's epoch (``benchmarks/mnist_epoch.py --models lbbnn_lowrank``) runs, per
minibatch step, the parts timed here one by one, each called from Python on the state of
a fresh ``LBBNN(posterior="lowrank")`` member of the 784-400-600-10 ReLU classifier
(560,000 weights, rank 5; 4.5 million variational parameters with the factors) on a
batch of 100 random rows:

* ``clear``: the sigmas from rho and the gradient zeroed (``kvi._clear_step``);
* ``alphas``: the inclusion probabilities (``klbbnn.set_alphas``);
* ``slab_terms``: the closed-form KL and its gradient (``lowrank_slab_terms``);
* ``draw_term``: one draw's log likelihood and its gradient (``kvi.mc_term``): the slab
  means ``kappa + V'u``, the local reparameterization's products forward and back, the
  chain rule to the parameters and the factors;
* ``finite_check``: the gradient's check for inf and NaN (``kvi.nonfinite``);
* ``adam``: Adam's step over all parameters (``kopt.descent_step``).

Each line holds the median and minimum of ``--repeats`` calls, with the team's helper
(``--n-jobs 2``, the lowrank passes registered) or without. The sum is about a step; the
epoch's own figure is ``mnist_epoch.py``'s. Run nothing else meanwhile::

    python benchmarks/lowrank_step.py --n-jobs 2 --out benchmarks/results/lowrank_step.jsonl
    python benchmarks/lowrank_step.py --n-jobs 1 --out benchmarks/results/lowrank_step.jsonl
    python benchmarks/lowrank_step.py --report benchmarks/results/lowrank_step.jsonl

``--report FILE ...`` prints doc/optimization.md's table: each part's latest median on 2
threads and on 1, and their sums.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _uci import add_report_argument, emitter, machine, package_commit, read_results  # noqa: E402

#: The report's name of each part.
PARTS = {
    "clear": "sigmas and the gradient zeroed ({n:.1f} million parameters)",
    "alphas": "inclusion probabilities",
    "slab_terms": "the closed-form KL and its gradient",
    "draw_term": "one draw: slab means `kappa + V'u`, products forward and back, chain rule",
    "finite_check": "the gradient's check for inf and NaN",
    "adam": "Adam over {n:.1f} million parameters",
}


def report(paths) -> str:
    """doc/optimization.md's table of a results file, or of several in order."""
    lines = read_results(paths)
    last = {(r["part"], r["n_jobs"]): r for r in lines}
    jobs = sorted({j for _, j in last}, reverse=True)
    head = " | ".join(f"{j} thread{'s' * (j > 1)}" for j in jobs)
    out = [f"| part | {head} |", "|---" * (len(jobs) + 1) + "|"]
    for part, name in PARTS.items():
        cells = [f"{last[(part, j)]['ms_median']:.2f} ms" for j in jobs]
        n = max(last[(part, j)]["n_params"] for j in jobs) / 1e6
        out.append(f"| {name.format(n=n)} | " + " | ".join(cells) + " |")
    sums = [sum(last[(part, j)]["ms_median"] for part in PARTS) for j in jobs]
    out.append("| sum | " + " | ".join(f"{t:.1f} ms" for t in sums) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=5)
    parser.add_argument("--rows", type=int, default=100, help="the minibatch")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--n-jobs", type=int, default=2, choices=(1, 2))
    parser.add_argument("--conditions", default=None, help="idle or loaded, for the record")
    parser.add_argument("--out", default=None, help="append the JSON lines to this file")
    add_report_argument(parser, "doc/optimization.md")
    args = parser.parse_args()
    if args.report:
        print(report(args.report), end="")
        return

    from skbnn.kernels import density as knet
    from skbnn.kernels import helper
    from skbnn.kernels import lbbnn as klbbnn
    from skbnn.kernels import lbbnn_lowrank as klowrank
    from skbnn.kernels import lrt as klrt
    from skbnn.kernels import optim as kopt
    from skbnn.kernels import vi as kvi
    from skbnn.log_posterior import LogPosterior
    from skbnn.methods import LBBNN

    rng = np.random.default_rng(0)
    n = args.rows
    X = rng.random((n, 784))
    Y = np.eye(10)[rng.integers(0, 10, n)]
    target = LogPosterior(X, Y, (400, 600), "relu", "categorical")
    method = LBBNN(posterior="lowrank", rank=args.rank)
    vcfg = method._vcfg(target)
    lam = method._start(target, np.random.default_rng(0), vcfg)
    p, layout = target.n_params, target.layout
    tgt = target.kernel_target(own=True)
    work = method._work(target, vcfg)
    sizes = layout.sizes
    ws = np.empty(max(klrt.lrt_workspace_size(sizes, n), knet.workspace_size(sizes, n)))
    stats = np.empty(2 + 10)
    draws = np.random.default_rng(5)
    opt = kopt.optimizer(0, lam.size)
    theta = lam.copy()

    parts = {
        "clear": lambda: kvi._clear_step(lam, p, work),
        "alphas": lambda: klbbnn.set_alphas(lam, p, work),
        "slab_terms": lambda: klowrank.lowrank_slab_terms(
            lam, p, layout.n_weights, sizes, layout.offsets, args.rank, work, True
        ),  # fmt: skip
        "draw_term": lambda: kvi.mc_term(lam, p, tgt, vcfg, work, ws, stats, draws, True, 1.0),
        "finite_check": lambda: kvi.nonfinite(work.glam, work.glam.shape[0]),
        "adam": lambda: kopt.descent_step(theta, work.glam, -1e-6, 1e-9, opt, True),
    }
    if args.n_jobs == 2:
        klowrank.register_tasks()
    emit = emitter(args.out)
    with helper.team(args.n_jobs == 2):
        for name, call in parts.items():
            call()
            seconds = []
            for _ in range(args.repeats):
                start = time.perf_counter()
                call()
                seconds.append(time.perf_counter() - start)
            emit({
                "part": name, "n_jobs": args.n_jobs, "rank": args.rank, "rows": n,
                "n_params": int(lam.size),
                "ms_median": round(1e3 * float(np.median(seconds)), 3),
                "ms_min": round(1e3 * min(seconds), 3), "repeats": args.repeats,
                "commit": package_commit(), "conditions": args.conditions, **machine(),
                "command": "python benchmarks/lowrank_step.py " + " ".join(sys.argv[1:]),
            })  # fmt: skip


if __name__ == "__main__":
    main()
