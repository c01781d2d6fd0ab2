"""Reading the UCI regression splits (shared by the benchmark scripts).

A dataset folder holds ``data.txt`` (whitespace-separated floats, one row per example),
``index_features.txt`` / ``index_target.txt`` (0-based column indices),
``index_train_K.txt`` / ``index_test_K.txt`` (0-based row indices of split K) and
``n_hidden.txt`` (hidden units of the protocol's single layer); the files may also sit in a
``data/`` subfolder, as in the repository they come from.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"


def dataset_folder(dataset: str, data_dir: Path | str | None = None) -> Path:
    """The folder holding ``dataset``'s files; ``FileNotFoundError`` naming it if absent."""
    folder = Path(data_dir or DEFAULT_DATA_DIR) / dataset
    if (folder / "data").is_dir():
        folder = folder / "data"
    if not (folder / "data.txt").is_file():
        raise FileNotFoundError(
            f"no UCI dataset {dataset!r}: {folder / 'data.txt'} does not exist "
            "(pass --data-dir, the folder holding one subfolder per dataset)"
        )
    return folder


def split_ids(dataset: str, data_dir: Path | str | None = None) -> list[int]:
    """The split numbers K for which both index files exist, in increasing order."""
    folder = dataset_folder(dataset, data_dir)
    ids = [int(re.fullmatch(r"index_train_(\d+)\.txt", p.name)[1]) for p in folder.iterdir()
           if re.fullmatch(r"index_train_(\d+)\.txt", p.name)]  # fmt: skip
    return sorted(k for k in ids if (folder / f"index_test_{k}.txt").is_file())


def n_hidden(dataset: str, data_dir: Path | str | None = None) -> int | None:
    """Hidden units from ``n_hidden.txt``, or None if the file is absent."""
    path = dataset_folder(dataset, data_dir) / "n_hidden.txt"
    return int(np.loadtxt(path)) if path.is_file() else None


def load_split(dataset: str, split: int, data_dir: Path | str | None = None):
    """Train/test arrays of one split: ``(X_train, y_train, X_test, y_test)`` (raw units)."""
    folder = dataset_folder(dataset, data_dir)
    data = np.loadtxt(folder / "data.txt", ndmin=2)
    features = np.loadtxt(folder / "index_features.txt", dtype=int, ndmin=1)
    target = int(np.loadtxt(folder / "index_target.txt", dtype=int))
    train = np.loadtxt(folder / f"index_train_{split}.txt", dtype=int, ndmin=1)
    test = np.loadtxt(folder / f"index_test_{split}.txt", dtype=int, ndmin=1)
    X, y = data[:, features], data[:, target]
    return X[train], y[train], X[test], y[test]


def standardize(X_train: np.ndarray, X_test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both splits scaled by the training split's mean and sd; constant columns only centred."""
    mean, std = X_train.mean(axis=0), X_train.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    return (X_train - mean) / std, (X_test - mean) / std


def machine() -> dict:
    """Cores and CPU model of this machine, the numba release, and the CPU numba compiles for
    (``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES``, ``host`` when unset), for the record.
    The numba release is None in a peer's environment that has no numba."""
    import importlib.metadata
    import os
    import platform

    try:
        numba_release = importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:
        numba_release = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "numba": numba_release,
        "numba_cpu_name": os.environ.get("NUMBA_CPU_NAME", "host"),
        "numba_cpu_features": os.environ.get("NUMBA_CPU_FEATURES", "host"),
    }


def provenance(script: str, argv: list[str] | None) -> dict:
    """What every results line records of its run: the commit, the versions of skbnn and
    scikit-learn, the command that reproduces it (``python benchmarks/<script> ...``) and
    :func:`machine`."""
    import shlex
    import sys

    import sklearn

    from skbnn import __version__

    commit = _commit(Path(__file__).resolve().parents[1])
    argv = sys.argv[1:] if argv is None else list(argv)
    return {"commit": commit, "skbnn": __version__, "sklearn": sklearn.__version__,
            "command": "python " + shlex.join([f"benchmarks/{script}", *argv]),
            **machine()}  # fmt: skip


def package_commit() -> str | None:
    """The commit of the skbnn checkout that is imported, which ``PYTHONPATH`` may point
    at another worktree than the script's (a before-and-after run)."""

    import skbnn

    return _commit(Path(skbnn.__file__).resolve().parent.parent) or None


def _commit(checkout: Path) -> str:
    """The checkout's short commit, marked ``-dirty`` where its package differs from it
    (uncommitted changes under ``skbnn/``: the figures are not that commit's)."""
    import subprocess

    def git(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True,
                              text=True).stdout.strip()  # fmt: skip

    commit = git("rev-parse", "--short", "HEAD")
    if commit and git("status", "--porcelain", "--", "skbnn"):
        commit += "-dirty"
    return commit


def fresh_numba_cache(prefix: str = "skbnn-compare-") -> None:
    """Point numba's cache at a new empty folder, so the first fit compiles as on a new
    install (set before skbnn is imported)."""
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix=prefix)


def emitter(path: str | None = None):
    """A function that prints a record as one JSON line and, with ``path``, appends the line
    to that file; keys that start with ``_`` are working data and stay out."""

    def emit(record: dict) -> None:
        line = json.dumps({k: v for k, v in record.items() if not k.startswith("_")})
        print(line, flush=True)
        if path:
            with open(path, "a") as f:
                f.write(line + "\n")

    return emit


def read_results(paths) -> list[dict]:
    """The JSON lines of a results file, or of several in order."""
    paths = [paths] if isinstance(paths, str | Path) else paths
    return [json.loads(line) for path in paths for line in Path(path).read_text().splitlines()
            if line.strip()]  # fmt: skip


def add_report_argument(parser, page: str) -> None:
    """``--report FILE ...``: print ``page``'s table of these results files, no fit."""
    parser.add_argument("--report", nargs="+", default=None, metavar="FILE",
                        help=f"print {page}'s table of these results files, no fit")  # fmt: skip
