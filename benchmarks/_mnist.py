"""Reading MNIST from the four gzipped IDX files in ``../shared/data/mnist`` (never copied).

An IDX file is a big-endian header, a magic number whose last byte is the number of
dimensions, then each dimension as a uint32, followed by the data (uint8 here). The
uncompressed files' md5 checksums, from the data folder's README, are checked on reading.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"

#: md5 of each uncompressed file, as the data folder's README gives them.
MD5 = {
    "train-images": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels": "a25bea736e30d166cdddb491f175f624",
    "t10k-images": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels": "27ae3e4e09519cfbb04c329615203637",
}


def read_idx(path: Path, expected_md5: str | None = None) -> np.ndarray:
    """The array an IDX file holds (gzipped or not), its md5 checked when given."""
    path = Path(path)
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    if expected_md5 is not None and hashlib.md5(raw).hexdigest() != expected_md5:
        raise ValueError(f"{path}: md5 {hashlib.md5(raw).hexdigest()}, expected {expected_md5}")
    if raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path}: not an IDX file of uint8 (magic {raw[:4].hex()})")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {data.size} values for shape {shape}")
    return data.reshape(shape)


def load_mnist(data_dir: Path | str | None = None):
    """``(X_train, y_train, X_test, y_test)``: pixels scaled to [0, 1] as float64 rows of
    784, labels as int64; 60,000 training and 10,000 test images."""
    folder = Path(data_dir or DEFAULT_DATA_DIR)
    if not folder.is_dir():
        raise FileNotFoundError(f"no MNIST folder {folder} (pass --data-dir)")
    out = []
    for part in ("train", "t10k"):
        images = read_idx(folder / f"{part}-images.idx3-ubyte.gz", MD5[f"{part}-images"])
        labels = read_idx(folder / f"{part}-labels.idx1-ubyte.gz", MD5[f"{part}-labels"])
        out += [images.reshape(len(images), -1) / 255.0, labels.astype(np.int64)]
    return tuple(out)
