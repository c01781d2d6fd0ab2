"""
Which pixels does a digit classifier need? LBBNN's inclusion probabilities.
===========================================================================

A latent binary BNN (``method="lbbnn"``) learns, for every weight, the probability that it
belongs in the network. On scikit-learn's 8x8 digits this script fits a
``64 -> 100 -> 100 -> 10`` ReLU classifier and plots

* the first layer's inclusion probabilities (pixels x hidden units),
* ``feature_inclusion_`` as an 8x8 image: the probability that a pixel has a path to an
  output through the weights of the median probability model (those with inclusion
  probability above 0.5); the border pixels, which are nearly constant, drop out,

and prints the test accuracy, the density of the network and the pixels
``SelectFromModel(importance_getter="feature_inclusion_", threshold=0.5)`` keeps.

With ``--mnist DIR`` (the four gzipped IDX files of MNIST) it fits the talk's
``784 -> 400 -> 600 -> 10`` network instead, with Adam in batches of 100 at the rate
``1e-3``, pixels scaled to [0, 1], and draws the 28x28 map (``--max-iter 10`` for a
first look: LBBNN's default epochs at 60,000 rows take long on few cores).

    pip install ".[plot]"
    python examples/lbbnn_inclusion.py                  # writes lbbnn_inclusion.png
    python examples/lbbnn_inclusion.py --max-iter 50 --out /tmp/quick.png
    python examples/lbbnn_inclusion.py --mnist ../shared/data/mnist --out mnist.png
"""

from __future__ import annotations

import argparse
import gzip
import time
from pathlib import Path

import numpy as np
from sklearn.datasets import load_digits
from sklearn.feature_selection import SelectFromModel
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skbnn import BayesianMLPClassifier
from skbnn.methods import LBBNN


def read_idx(path: Path) -> np.ndarray:
    """The array a gzipped IDX file holds (big-endian sizes after a 4-byte magic number
    whose last byte is the number of dimensions)."""
    raw = gzip.decompress(path.read_bytes())
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def load_mnist(folder: str):
    """MNIST's training and test images (flat, scaled to [0, 1]) and labels."""
    out = []
    for part in ("train", "t10k"):
        images = read_idx(Path(folder) / f"{part}-images.idx3-ubyte.gz")
        labels = read_idx(Path(folder) / f"{part}-labels.idx1-ubyte.gz")
        out += [images.reshape(len(images), -1) / 255.0, labels.astype(np.int64)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-iter", type=int, default=None, help="epochs (default: LBBNN's)")
    parser.add_argument("--hidden", type=int, nargs="+", default=None,
                        help="default: 100 100, or the talk's 400 600 with --mnist")  # fmt: skip
    parser.add_argument("--mnist", default=None, help="MNIST's folder: fit the talk's network")
    parser.add_argument("--rows", type=int, default=None, help="MNIST's first ROWS images")
    parser.add_argument("--out", default="lbbnn_inclusion.png", help="the figure's file")
    args = parser.parse_args()

    if args.mnist:
        X_train, y_train, X_test, y_test = load_mnist(args.mnist)
        X_train, y_train = X_train[: args.rows], y_train[: args.rows]
        hidden = tuple(args.hidden or (400, 600))
        method = LBBNN(learning_rate_init=1e-3, batch_size=100, max_iter=args.max_iter)
    else:
        X, y = load_digits(return_X_y=True)
        X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                            random_state=0, stratify=y)  # fmt: skip
        scaler = StandardScaler().fit(X_train)
        X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
        hidden = tuple(args.hidden or (100, 100))
        method = LBBNN(learning_rate_init=0.01, max_iter=args.max_iter)
    side = int(round(np.sqrt(X_train.shape[1])))

    clf = BayesianMLPClassifier(hidden, activation="relu", random_state=0, method=method)
    start = time.perf_counter()
    clf.fit(X_train, y_train)
    seconds = time.perf_counter() - start
    n_weights = sum(a.size for a in clf.inclusion_probabilities_)
    print(f"fit: {seconds:.1f} s, ELBO {clf.elbo_:.1f}")
    print(f"test accuracy (model average): {clf.score(X_test, y_test):.3f}")
    print(f"density: {clf.density_:.4f} ({round(clf.density_ * n_weights)} of {n_weights} "
          "weights with inclusion probability > 0.5)")  # fmt: skip
    for layer, a in enumerate(clf.inclusion_probabilities_, start=1):
        print(f"  layer {layer} {a.shape}: {np.mean(a > 0.5):.4f} of its weights in")
    keep = SelectFromModel(clf, prefit=True, importance_getter="feature_inclusion_",
                           threshold=0.5).get_support()  # fmt: skip
    print(f"pixels SelectFromModel keeps (feature_inclusion_ > 0.5): {keep.sum()} of {keep.size}")

    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed (pip install '.[plot]'): no figure")
        return
    # constrained layout places the colorbars and titles without overlap (tight_layout
    # let the right panel's title run into the left colorbar; on two lines it is no wider
    # than its square image)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained",
                                   gridspec_kw={"width_ratios": [2.4, 1]})  # fmt: skip
    first = clf.inclusion_probabilities_[0]
    im = ax1.imshow(first, aspect="auto", cmap="viridis", vmin=0, vmax=1, interpolation="none")
    ax1.set_xlabel("hidden unit of the first layer")
    ax1.set_ylabel("input pixel")
    ax1.set_title("first layer: inclusion probability of each weight")
    fig.colorbar(im, ax=ax1)
    im2 = ax2.imshow(clf.feature_inclusion_.reshape(side, side), cmap="viridis", vmin=0,
                     vmax=1)  # fmt: skip
    ax2.set_title("feature_inclusion_:\nP(path to an output)")
    ax2.set_xticks([])
    ax2.set_yticks([])
    fig.colorbar(im2, ax=ax2)
    fig.savefig(args.out, dpi=100)
    print(f"figure: {args.out}")


if __name__ == "__main__":
    main()
