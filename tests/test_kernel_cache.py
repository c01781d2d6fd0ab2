"""numba's cache checks only a module's own source; skbnn drops cached kernels whose
sources, across the kernel modules, changed."""

from skbnn.kernels import _drop_stale_numba_cache


def test_cached_kernels_are_dropped_when_any_kernel_source_changes(tmp_path):
    (tmp_path / "network.py").write_text("x = 1\n")
    (tmp_path / "hmc.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    index, data = cache / "hmc._leapfrog-1.py311.nbi", cache / "hmc._leapfrog-1.py311.1.nbc"
    for path in (index, data):
        path.write_bytes(b"compiled")

    _drop_stale_numba_cache(tmp_path)  # no stamp yet: nothing is known about these files
    assert not index.exists() and not data.exists()

    for path in (index, data):
        path.write_bytes(b"compiled")
    _drop_stale_numba_cache(tmp_path)  # same sources: the cache stays
    assert index.exists() and data.exists()

    (cache / "network.cpython-311.pyc").write_bytes(b"bytecode")
    (tmp_path / "network.py").write_text("x = 3\n")  # another module than hmc.py changed
    _drop_stale_numba_cache(tmp_path)
    assert not index.exists() and not data.exists()
    assert (cache / "network.cpython-311.pyc").exists()  # only numba's files are touched
