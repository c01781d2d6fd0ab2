"""Numba kernels (arrays in, arrays out).

numba caches each compiled function beside its module and checks only that module's own
source file for changes. A kernel that inlines a function from another module (every
sampler kernel calls ``network.logp_grad``) would otherwise keep running the old code after
that other module changed, for example after an upgrade that touched only
``network.py``: silently wrong results. So on import the kernels' sources are hashed
together, and cached kernels compiled from other sources are deleted.
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def _drop_stale_numba_cache(here: Path | None = None) -> None:
    """Delete numba's cached kernels in ``here/__pycache__`` if ``here/*.py`` changed."""
    here = Path(__file__).resolve().parent if here is None else here
    digest = hashlib.sha256()
    for source in sorted(here.glob("*.py")):
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    stamp = digest.hexdigest()
    cache = here / "__pycache__"
    stamp_file = cache / "skbnn-kernels-sources.sha256"
    try:
        if stamp_file.read_text() == stamp:
            return
    except OSError:
        pass
    try:
        cache.mkdir(exist_ok=True)
        for path in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
            path.unlink(missing_ok=True)
        stamp_file.write_text(stamp)
    except OSError:
        # a read-only install cannot hold numba's cache either, so nothing is stale there
        pass


_drop_stale_numba_cache()
