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


def test_kernels_cached_under_numba_cache_dir_are_dropped_too(tmp_path, monkeypatch):
    # With NUMBA_CACHE_DIR set (CI's generic-CPU build keeps its cache apart that way) numba
    # caches elsewhere; the stale kernels there must go as well. A real numba run in a
    # subprocess shows where it puts them, so the folder is numba's, not a guess.
    import subprocess
    import sys

    from numba.core import config

    from skbnn.kernels import _cache_dirs

    kernels, cache_root = tmp_path / "kernels", tmp_path / "numba-cache"
    kernels.mkdir()
    (kernels / "mod.py").write_text(
        "from numba import njit\n\n@njit(cache=True)\ndef f(x):\n    return x + 1\n"
    )
    code = f"import sys; sys.path.insert(0, {str(kernels)!r}); import mod; mod.f(1)"
    env = {"NUMBA_CACHE_DIR": str(cache_root), "PATH": ""}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    monkeypatch.setattr(config, "CACHE_DIR", str(cache_root))
    folder = _cache_dirs(kernels)[-1]
    assert sorted(p.suffix for p in folder.iterdir()) == [".nbc", ".nbi"]

    _drop_stale_numba_cache(kernels)
    assert not list(folder.glob("*.nb*"))
    assert (folder / "skbnn-kernels-sources.sha256").exists()
