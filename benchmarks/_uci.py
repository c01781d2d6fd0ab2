"""Reading the UCI regression splits (shared by the benchmark scripts)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"


def load_split(dataset: str, split: int, data_dir: Path | str | None = None):
    """Train/test arrays of one split: ``(X_train, y_train, X_test, y_test)`` (raw units)."""
    folder = Path(data_dir or DEFAULT_DATA_DIR) / dataset
    if (folder / "data").is_dir():
        folder = folder / "data"
    data = np.loadtxt(folder / "data.txt")
    features = np.loadtxt(folder / "index_features.txt", dtype=int, ndmin=1)
    target = int(np.loadtxt(folder / "index_target.txt", dtype=int))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int)
    X, y = data[:, features], data[:, target]
    return X[train], y[train], X[test], y[test]
