"""Numba kernels (arrays in, arrays out), one module per role:

* ``network``: forward pass, log-likelihoods, priors and their gradients; the
  ``KernelTarget`` every kernel takes.
* ``linalg``, ``integrators``: vector helpers and metrics; leapfrog, momenta, energy.
* ``transitions``: one MCMC transition each (NUTS, static HMC, MALA, random walk).
* ``gibbs``: exact conditional moves (noise, layer precisions, output layer, ReLU scales).
* ``adaptation``: step-size dual averaging, Welford metric estimates.
* ``chain``: a chain's named state and the warm-up/sampling blocks the chain driver runs.
* ``smc``: the SMC particles' moves and evaluations.
* ``optim``: the training engine's minibatch epoch (Adam, SGD, SWAG's moments).
* ``predict``: mixture quantiles for predictive intervals.

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


def _cache_dirs(here: Path) -> list[Path]:
    """Where numba may keep the kernels of ``here``: beside them, in the user's cache folder
    (its choice when ``here`` is read-only) or under ``NUMBA_CACHE_DIR``."""
    dirs = [here / "__pycache__"]
    from numba.core import caching, config
    from numba.misc.appdirs import AppDirs

    # the folder numba's own locators pick for a source file of ``here``
    locator = getattr(caching, "CacheLocator", None) or caching._CacheLocator
    subpath = locator.get_suitable_cache_subpath(str(here / "x.py"))
    dirs.append(Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / subpath)
    if config.CACHE_DIR:
        dirs.append(Path(config.CACHE_DIR) / subpath)
    return dirs


def _numba_cache_dir(source: Path) -> Path | None:
    """The folder numba caches a kernel of ``source`` in: the first of its locators that
    finds a writable one, as numba picks; ``None`` where none does."""
    from numba.core import caching

    def probe():  # a function for the locators to look at; never compiled
        return None

    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.60
    for locator_class in impl._locator_classes:
        try:
            locator = locator_class.from_function(probe, str(source))
        except Exception:  # locators for other sources (IPython cells, zip files) may fail
            continue
        if locator is not None:
            return Path(locator.get_cache_path()).resolve()
    return None


def _drop_stale_numba_cache(here: Path | None = None) -> None:
    """Delete numba's cached kernels of ``here`` if ``here/*.py`` changed.

    Every place numba may cache them is checked: ``here/__pycache__``, the user's cache
    folder (a read-only install's kernels go there) and, with ``NUMBA_CACHE_DIR`` set, its
    folder for ``here`` (a build for another CPU, kept apart there, would otherwise go stale
    in the same way).
    """
    here = Path(__file__).resolve().parent if here is None else here
    sources = sorted(here.glob("*.py"))
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    stamp = digest.hexdigest()
    active = _numba_cache_dir(sources[0]) if sources else None
    for cache in _cache_dirs(here):
        if cache.resolve() != active and not cache.is_dir():
            continue  # numba does not cache here, and never did: nothing to create or drop
        stamp_file = cache / "skbnn-kernels-sources.sha256"
        try:
            if stamp_file.read_text() == stamp:
                continue
        except OSError:
            pass
        try:
            cache.mkdir(parents=True, exist_ok=True)
            for path in [*cache.glob("*.nbi"), *cache.glob("*.nbc")]:
                path.unlink(missing_ok=True)
            stamp_file.write_text(stamp)
        except OSError:
            # a read-only install cannot hold numba's cache either, so nothing is stale there
            pass


_drop_stale_numba_cache()
