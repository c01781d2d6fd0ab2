"""``njit`` for the kernels: numba's, with its on-disk cache only where numba can write one.

numba caches a kernel beside its source (``skbnn/kernels/__pycache__``) or, where that
folder is not writable (a read-only install), in the user's cache folder
(``~/.cache/numba`` or ``$XDG_CACHE_HOME/numba``), or wherever ``NUMBA_CACHE_DIR`` says.
Where none of them is writable, ``njit(cache=True)`` raises at import. Here the kernels
then compile without the cache, after one warning: every new process compiles them again.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numba

from ..exceptions import CompilationCacheWarning
from . import _numba_cache_dir

#: Whether the kernels use numba's on-disk cache (decided once, at import).
CACHE = _numba_cache_dir(Path(__file__).with_name("network.py")) is not None
if not CACHE:
    warnings.warn(
        "numba cannot cache skbnn's compiled kernels (neither skbnn/kernels/__pycache__ nor "
        "the user cache folder is writable), so every new process compiles them again; set "
        "NUMBA_CACHE_DIR to a writable folder to keep them.",
        CompilationCacheWarning,
        stacklevel=2,
    )


def njit(*args, **kwargs):
    """:func:`numba.njit`, with ``cache=True`` dropped when numba cannot cache (:data:`CACHE`)."""
    if not CACHE:
        kwargs["cache"] = False
    return numba.njit(*args, **kwargs)
