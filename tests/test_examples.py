"""The iris architecture-selection example runs end to end (tiny settings) and prints its
side-by-side table: ten candidates with SMC's and Laplace's evidence, accuracy and fit time,
each method's model average, and the comparison of the two evidences."""

import runpy
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_iris_architecture_selection_runs(monkeypatch, capsys):
    script = EXAMPLES / "iris_architecture_selection.py"
    # the empirical Bayes column refits each MAP several times: left out to keep this fast
    argv = [str(script), "--seeds", "2", "--particles", "40", "--no-empirical-bayes"]
    monkeypatch.setattr(sys, "argv", argv)
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("(")]
    assert len(rows) == 10
    assert rows[0].split()[:3] == ["(1,)", "relu", "11"]  # 4*1+1 + (1+1)*3 parameters
    assert rows[-1].split()[:4] == ["(2,", "2)", "logistic", "25"]
    # after the name and size: two "mean +- sd" evidences, P(model | y), two accuracies,
    # two times per fit
    assert len(rows[0].split()) == 3 + 2 * 3 + 1 + 2 + 2
    for method in ("SMC", "Laplace"):
        assert f"\n{method}:\n  model average (weights P(model | y)): test accuracy" in out
    assert out.count("wall time for all 20 fits") == 2
    assert "Spearman rank correlation of the evidences: " in out
    assert "most probable architecture: SMC " in out
    assert "of SMC's" in out


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
