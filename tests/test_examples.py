"""The command-line examples run end to end with tiny settings: the iris
architecture-selection example prints its side-by-side table (ten candidates with SMC's
and Laplace's evidence, accuracy and fit time, each method's model average, the
comparison of the two evidences); LBBNN's and the credit-default study's print their
figures and write their plots; the Dask example runs its 20-candidate search on a
two-worker LocalCluster."""

import json
import runpy
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_iris_architecture_selection_runs(monkeypatch, capsys):
    script = EXAMPLES / "iris_architecture_selection.py"
    # both optional routes, with one initialization per MAP to keep this fast
    argv = [str(script), "--seeds", "2", "--particles", "40", "--n-init", "1",
            "--empirical-bayes", "--screen"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "SMC with 40 particles, 1 move per stage and target ESS 0.9" in out
    rows = [line for line in out.splitlines() if line.startswith("(")]
    assert len(rows) == 10
    assert rows[0].split()[:3] == ["(1,)", "relu", "11"]  # 4*1+1 + (1+1)*3 parameters
    assert rows[-1].split()[:4] == ["(2,", "2)", "logistic", "25"]
    # after the name and size: three "mean +- sd" evidences, P(model | y), three
    # accuracies, three times per fit
    assert len(rows[0].split()) == 3 + 3 * 3 + 1 + 3 + 3
    for method in ("SMC", "Laplace", "Laplace EB"):
        assert f"\n{method}:\n  model average (weights P(model | y)): test accuracy" in out
    assert out.count("wall time for all 20 fits") == 3
    assert "Spearman rank correlation of the evidences: " in out
    assert "most probable architecture: SMC " in out
    assert "of SMC's" in out
    assert "(empirical Bayes, a tuned prior: Spearman with SMC " in out
    assert "SMC screened by Laplace (same prior)" in out
    assert "candidates refitted per seed: " in out and "against" in out


def test_lbbnn_inclusion_runs(monkeypatch, capsys, tmp_path):
    script = EXAMPLES / "lbbnn_inclusion.py"
    argv = [str(script), "--max-iter", "3", "--hidden", "8", "--out", str(tmp_path / "f.png")]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "test accuracy (model average): " in out
    assert "layer 1 (64, 8)" in out and "layer 2 (8, 10)" in out
    assert "pixels SelectFromModel keeps (feature_inclusion_ > 0.5): " in out
    # matplotlib is an optional extra: the figure is there exactly when it is installed
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "no figure" in out
    else:
        assert (tmp_path / "f.png").stat().st_size > 0


def test_credit_default_runs_on_a_file_of_its_format(monkeypatch, capsys, tmp_path):
    # the study's data stay outside the repository: a synthetic file of the same layout
    # (ID, 23 features, the 0/1 target; 22 % positives) stands in for it
    rng = np.random.default_rng(0)
    n = 600
    X = rng.normal(size=(n, 23))
    y = (X[:, 5] + 0.5 * rng.normal(size=n) > 0.8).astype(int)
    header = ["ID", *[f"X{i}" for i in range(23)], "default.payment.next.month"]
    table = np.column_stack([np.arange(1, n + 1), X, y])
    np.savetxt(tmp_path / "UCI_Credit_Card.csv", table, delimiter=",", header=",".join(header),
               comments="", fmt="%.6g")  # fmt: skip
    script = EXAMPLES / "credit_default.py"
    argv = [str(script), "--data-dir", str(tmp_path), "--quick", "--subsamples", "1",
            "--out", str(tmp_path / "f.png"), "--json", str(tmp_path / "r.jsonl")]  # fmt: skip
    monkeypatch.setattr(sys, "argv", argv)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tiny runs warn of convergence, as they should
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert f"{n} clients, 23 features" in out
    for name in ("BNN, NUTS, N(0, 1) prior", "BNN, NUTS, 480 rows", "BNN, Laplace", "BNN, VI",
                 "LogisticRegression", "HistGradientBoosting"):  # fmt: skip
        assert name in out
    records = [json.loads(line) for line in open(tmp_path / "r.jsonl")]
    assert {r["part"] for r in records} == {"subsample", "full"}
    assert all(0 <= r["accuracy"] <= 1 and r["cross_entropy"] > 0 for r in records)
    assert (tmp_path / "f.png").stat().st_size > 0


def test_abstention_curve_decides_the_most_certain_first():
    module = runpy.run_path(str(EXAMPLES / "credit_default.py"))
    proba = np.array([0.9, 0.45, 0.2, 0.6, 0.05])
    y = np.array([1, 1, 1, 0, 0])  # right, wrong, wrong, wrong, right
    # by certainty: 0.05 (right), 0.9 (right), 0.2 (wrong), 0.6 (wrong), 0.45 (wrong)
    acc = module["abstention_curve"](y, proba, [0.2, 0.4, 0.6, 1.0])
    np.testing.assert_allclose(acc, [1.0, 1.0, 2 / 3, 2 / 5])


@pytest.mark.dask
def test_dask_cluster_runs_the_search_on_a_local_cluster(monkeypatch, capsys, tmp_path):
    # two worker processes (on one thread, joblib would not use the cluster) and tiny
    # Laplace fits on 100 rows: 10-30 s with the cluster's start (at a load of 4)
    pytest.importorskip("distributed")
    script = EXAMPLES / "dask_cluster.py"
    argv = [str(script), "--workers", "2", "--quick", "--json", str(tmp_path / "t.jsonl")]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "20 candidates on 2 workers, laplace" in out
    assert "best parameters: {'bayesianmlpregressor__activation': " in out
    [record] = [json.loads(line) for line in open(tmp_path / "t.jsonl")]
    assert record["workers"] == record["threads"] == 2
    assert record["n_candidates"] == record["n_fits"] == 20
    assert record["tasks_on_workers"] > 0  # joblib batches calls: not one task per fit
    assert record["search_s"] > 0 and record["workers_cpu_s"] > 0
    assert set(record["best_params"]) == {"activation", "hidden_layer_sizes"}
