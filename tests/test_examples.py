"""The iris architecture-selection example runs end to end (tiny settings) and prints its
table: ten candidates, the model average and the wall time."""

import runpy
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_iris_architecture_selection_runs(monkeypatch, capsys):
    script = EXAMPLES / "iris_architecture_selection.py"
    monkeypatch.setattr(sys, "argv", [str(script), "--seeds", "2", "--particles", "40"])
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("(")]
    assert len(rows) == 10
    assert rows[0].split()[:3] == ["(1,)", "relu", "11"]  # 4*1+1 + (1+1)*3 parameters
    assert rows[-1].split()[:4] == ["(2,", "2)", "logistic", "25"]
    assert "model average (weights P(model | y)): test accuracy" in out
    assert "wall time for all 20 fits" in out
