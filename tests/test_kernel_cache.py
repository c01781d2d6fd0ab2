"""numba's cache: where the kernels are cached, that a cached kernel compiled from other
kernel sources is not used, saves across processes, and compiling in a helper process."""

import pytest


def test_a_cache_index_written_for_other_kernel_sources_reads_as_empty(tmp_path):
    # numba checks a cached kernel against its own module only; each index here also holds
    # the digest of every kernel module, so a change to any of them makes it stale
    from skbnn.kernels._compile import LockedIndexDataCacheFile, sources_digest, stamp_sources

    (tmp_path / "density.py").write_text("x = 1\n")
    (tmp_path / "chain.py").write_text("y = 2\n")
    before = sources_digest(tmp_path)
    assert sources_digest(tmp_path) == before
    (tmp_path / "density.py").write_text("x = 3\n")  # another module than chain.py changed
    after = sources_digest(tmp_path)
    assert after != before

    def index(digest):
        cache_file = LockedIndexDataCacheFile(
            cache_path=str(tmp_path), filename_base="chain.f", source_stamp="own"
        )
        stamp_sources(cache_file, digest)
        return cache_file

    index(before).save("signature", "machine code")
    assert index(before).load("signature") == "machine code"
    assert index(after).load("signature") is None  # stale: compiled again, then saved over
    index(after).save("signature", "new machine code")
    assert index(after).load("signature") == "new machine code"


def test_an_index_naming_a_module_that_is_gone_reads_as_empty(tmp_path):
    # an older install's index may name types of a kernel module since removed: it must read
    # as a miss, not fail to unpickle
    import pickle
    import sys
    import types

    import numba

    from skbnn.kernels._compile import LockedIndexDataCacheFile, stamp_sources

    cache_file = LockedIndexDataCacheFile(
        cache_path=str(tmp_path), filename_base="chain.f", source_stamp="own"
    )
    module = types.ModuleType("skbnn_kernel_module_since_removed")
    module.kind = type("Kind", (), {"__module__": module.__name__})
    module.kind.__qualname__ = "kind"
    sys.modules[module.__name__] = module
    gone = pickle.dumps(("stamp", {("signature", module.kind): "data file"}))
    del sys.modules[module.__name__]
    with pytest.raises(ModuleNotFoundError):
        pickle.loads(gone)
    with open(cache_file._index_path, "wb") as fh:
        pickle.dump(numba.__version__, fh)  # what numba itself wrote as the version
        fh.write(gone)
    stamp_sources(cache_file)
    assert cache_file.load("signature") is None


def test_importing_the_kernels_deletes_no_cache_file(tmp_path):
    import subprocess
    import sys

    site = _copy_of_skbnn(tmp_path)
    cache = site / "skbnn" / "kernels" / "__pycache__"
    cache.mkdir()
    files = [cache / "linalg.dot-1.py311.nbi", cache / "linalg.dot-1.py311.1.nbc"]
    for path in files:
        path.write_bytes(b"compiled")
    code = "import skbnn.kernels.density, skbnn.kernels.chain"
    subprocess.run([sys.executable, "-c", code], cwd=site, check=True, timeout=300)
    assert all(path.read_bytes() == b"compiled" for path in files)


# --------------------------------------------------------------------------------------
# A read-only install: numba's cache falls back to the user's cache folder, or the kernels
# run uncached after one warning; skbnn never fails to import. Each case runs a copy of
# the package in a fresh process. A regular file where a cache folder would go stands in
# for a folder that cannot be written: unlike permissions, it also holds for root.
# --------------------------------------------------------------------------------------

#: the fresh process: import skbnn from the copy, compile one small kernel, call it
_USE_A_KERNEL = """
import sys
import numpy as np
import skbnn
from skbnn.kernels import _compile, linalg
assert skbnn.__file__.startswith(sys.argv[1]), skbnn.__file__
print(linalg.dot(np.arange(3.0), np.ones(3)), _compile.CACHE, len(linalg.dot.stats.cache_hits))
"""


def _copy_of_skbnn(tmp_path):
    import shutil
    from pathlib import Path

    import skbnn

    site = tmp_path / "site"
    shutil.copytree(
        Path(skbnn.__file__).parent, site / "skbnn", ignore=shutil.ignore_patterns("__pycache__")
    )
    return site


def _run_copy(site, cache_home, *, read_only_tree=True, numba_cache_dir=None):
    import os
    import subprocess
    import sys

    if read_only_tree:
        (site / "skbnn" / "kernels" / "__pycache__").write_text("not a folder")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(site), XDG_CACHE_HOME=str(cache_home))
    if numba_cache_dir is not None:
        env.update(NUMBA_CACHE_DIR=str(numba_cache_dir))
    return subprocess.run(
        [sys.executable, "-c", _USE_A_KERNEL, str(site)],
        env=env,
        cwd=site,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _user_cache_folder(cache_home, site):
    from pathlib import Path

    from numba.core import caching
    from numba.misc.appdirs import AppDirs

    # the user-wide folder of the copy's kernels, under this test's cache home
    subpath = caching._CacheLocator.get_suitable_cache_subpath(
        str(site / "skbnn" / "kernels" / "x.py")
    )
    user_wide = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir) / subpath
    default_home = Path(AppDirs(appname="numba", appauthor=False).user_cache_dir).parent
    return cache_home / user_wide.relative_to(default_home)


def test_a_read_only_install_caches_in_the_user_cache_folder(tmp_path):
    site, cache_home = _copy_of_skbnn(tmp_path), tmp_path / "cache-home"
    run = _run_copy(site, cache_home)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3.0", "True", "0"]
    assert "Warning" not in run.stderr, run.stderr
    folder = _user_cache_folder(cache_home, site)
    assert list(folder.glob("linalg.dot-*.nbi")), sorted(p.name for p in folder.iterdir())

    # a second process loads the kernel from there; after another kernel module changes,
    # the kernel cached there is stale, as it is beside a writable install: compiled again,
    # then loaded by the next process
    run = _run_copy(site, cache_home, read_only_tree=False)
    assert run.stdout.split() == ["3.0", "True", "1"], run.stderr
    with open(site / "skbnn" / "kernels" / "density.py", "a") as f:
        f.write("\n# an upgrade\n")
    run = _run_copy(site, cache_home, read_only_tree=False)
    assert run.stdout.split() == ["3.0", "True", "0"], run.stderr
    run = _run_copy(site, cache_home, read_only_tree=False)
    assert run.stdout.split() == ["3.0", "True", "1"], run.stderr


def test_no_writable_cache_folder_runs_uncached_after_one_warning(tmp_path):
    site = _copy_of_skbnn(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, so no folder can be made below it")
    run = _run_copy(site, blocker / "cache-home")
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["3.0", "False", "0"]
    warnings = [line for line in run.stderr.splitlines() if "Warning" in line]
    assert len(warnings) == 1 and "CompilationCacheWarning" in warnings[0], run.stderr
    assert "NUMBA_CACHE_DIR" in warnings[0]

    # its advice, as printed: NUMBA_CACHE_DIR set to a writable folder. Silent, cached
    # there, and the next process loads the kernel instead of compiling it again
    kept = tmp_path / "kept"
    kept.mkdir()
    for hits in ("0", "1"):
        run = _run_copy(site, blocker / "cache-home", numba_cache_dir=kept)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["3.0", "True", hits], run.stderr
        assert "Warning" not in run.stderr, run.stderr
    assert list(kept.rglob("linalg.dot-*.nbi"))


#: one process of the race: save its own keys into one kernel's cache files, all at once
_SAVE_MANY = """
import sys
from skbnn.kernels._compile import LockedIndexDataCacheFile, IndexDataCacheFile
cls = {"locked": LockedIndexDataCacheFile, "numba": IndexDataCacheFile}[sys.argv[3]]
f = cls(cache_path=sys.argv[1], filename_base="kernel", source_stamp="stamp")
for i in range(40):
    key = f"{sys.argv[2]}-{i}"
    f.save(key, "data of " + key)
"""


def test_concurrent_saves_keep_the_index_and_the_data_in_step(tmp_path):
    # Four processes save 40 signatures each of one kernel into one cache at once, as test
    # workers or a cluster's workers sharing a cache do. Every entry must survive and name
    # its own data. (numba's unlocked save, this run with "numba", lost entries in 3 of 5
    # tries on the development machine, and left entries naming another key's data in 2.)
    import subprocess
    import sys

    from skbnn.kernels._compile import LockedIndexDataCacheFile

    runs = [
        subprocess.Popen([sys.executable, "-c", _SAVE_MANY, str(tmp_path), f"p{p}", "locked"])
        for p in range(4)
    ]
    assert all(run.wait(timeout=300) == 0 for run in runs)
    f = LockedIndexDataCacheFile(cache_path=str(tmp_path), filename_base="kernel",
                                 source_stamp="stamp")  # fmt: skip
    index = f._load_index()
    assert len(index) == 160
    for key in index:
        assert f.load(key) == "data of " + key


def _json_of_a_process(code, env=None, *args):
    """The last line of what ``code`` prints, as JSON, from a new process (``args`` its
    ``sys.argv[1:]``)."""
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(out.stdout.splitlines()[-1])


def _json_of_two_processes(code, env=None, *args):
    """:func:`_json_of_a_process` of two processes run in turn."""
    return [_json_of_a_process(code, env, *args) for _ in range(2)]


def test_a_second_process_loads_the_kernels_its_first_compiled():
    # What a new install pays once (issue 22): a fit compiles its kernels into numba's cache
    # (this session's folder, NUMBA_CACHE_DIR when set), and a later process on the same
    # folder loads every one of them instead of compiling. The first process compiles only
    # if no test before it has; numba's per-kernel counters tell hits from misses.

    code = (
        "import json, numpy as np\n"
        "from skbnn import BayesianMLPRegressor\n"
        "from skbnn.kernels import chain, density\n"
        "from skbnn.methods import NUTS\n"
        "X = np.linspace(-1, 1, 20)[:, None]\n"
        "BayesianMLPRegressor((2,), method=NUTS(n_chains=1, n_warmup=20), n_samples=10,\n"
        "                     random_state=0).fit(X, X[:, 0])\n"
        "kernels = (chain.run_nuts_block, chain.after_transition_kernel,\n"
        "           density.logp_grad_for(2, 0, 0), density.forward_batch_for(2))\n"
        "print(json.dumps({k.__name__: [len(k.stats.cache_hits), len(k.stats.cache_misses)]\n"
        "                  for k in kernels}))\n"
    )
    runs = _json_of_two_processes(code)
    # [hits, misses] per kernel (the network and prediction kernels for tanh, a Gaussian
    # likelihood and prior): the second process compiled nothing and loaded all four
    assert runs[1] == {
        "run_nuts_block": [1, 0],
        "after_transition_kernel": [1, 0],
        "logp_grad_2_0_0": [1, 0],
        "forward_batch_2": [1, 0],
    }


_COLD_NUTS = """
import json, numpy as np
from skbnn import BayesianMLPRegressor
from skbnn.kernels import _compile, chain, density
from skbnn.methods import NUTS
X = np.linspace(-1, 1, 20)[:, None]
BayesianMLPRegressor((2,), method=NUTS(n_chains=1, n_warmup=20), n_samples=10,
                     random_state=0).fit(X, X[:, 0])
kernels = (chain.run_nuts_block, chain.after_transition_kernel,
           density.logp_grad_for(2, 0, 0), density.forward_batch_for(2))
out = {k.__name__: [len(k.stats.cache_hits), len(k.stats.cache_misses)] for k in kernels}
# a kernel only the bookkeeping calls: compiled here if the block kernel had been with it
out["bookkeeping_compiled_here"] = bool(chain._gaussian_loglik.signatures)
# every line the helper prints has been read: its pipe is closed, not left to the collector
out["helper_pipes_closed"] = all(p.stdout.closed for p in _compile._BACKGROUND)
print(json.dumps(out))
"""


def test_a_cold_nuts_fit_compiles_its_bookkeeping_and_network_kernel_in_the_helper(tmp_path):
    # A cold NUTS fit splits its compiling over two processes: the fit's compiles the block
    # kernel without the bookkeeping that follows each transition, which it calls through
    # an address, while the helper compiles that bookkeeping, the network kernel and then
    # prediction's kernel; the fit's process loads all three from the cache (a hit each,
    # prediction's after waiting for the helper to end) and compiles only its own.
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SKBNN_COMPILE_ASIDE": "1"}
    first, second = _json_of_two_processes(_COLD_NUTS, env)
    assert first == {
        "run_nuts_block": [0, 1],
        "after_transition_kernel": [1, 0],
        "logp_grad_2_0_0": [1, 0],
        "forward_batch_2": [1, 0],
        "bookkeeping_compiled_here": False,
        "helper_pipes_closed": True,
    }
    assert second == {**first, "run_nuts_block": [1, 0]}


_COLD_LAPLACE = """
import json, numpy as np
from skbnn import BayesianMLPRegressor
from skbnn.kernels import backprop, density, helper, optim
from skbnn.methods import Laplace
X = np.linspace(-1, 1, 20)[:, None]
BayesianMLPRegressor((2,), method=Laplace(), n_samples=10, random_state=0,
                     n_jobs=2).fit(X, X[:, 0])
kernels = (optim.run_epochs, backprop.jacobian, density.logp_grad_for(2, 0, 0), helper.serve)
print(json.dumps({k.__name__: [len(k.stats.cache_hits), len(k.stats.cache_misses)]
                  for k in kernels}))
"""


def test_a_cold_laplace_fit_compiles_the_network_kernel_in_the_helper(tmp_path):
    # A cold Laplace fit compiles the Jacobian and its training kernels, which call the
    # network kernel only through its address, while the helper compiles the network
    # kernel and the team's loop: the fit's process loads those from the cache (a hit, no
    # miss).
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SKBNN_COMPILE_ASIDE": "1"}
    first, second = _json_of_two_processes(_COLD_LAPLACE, env)
    aside = {"logp_grad_2_0_0": [1, 0], "serve": [1, 0]}
    assert first == {"run_epochs": [0, 1], "jacobian": [0, 1], **aside}
    assert second == {"run_epochs": [1, 0], "jacobian": [1, 0], **aside}


_LBFGS_THEN_ADAM = """
import json, numpy as np
from skbnn import BayesianMLPClassifier
from skbnn.kernels import density, optim
from skbnn.methods import DeepEnsemble
X = np.linspace(-1, 1, 20)[:, None]
y = (X[:, 0] > 0).astype(int)
kernels = (optim.run_epochs, density.logp_grad_for(2, 1, 0))
fits = []
for solver in ("lbfgs", "adam"):
    clf = BayesianMLPClassifier((2,), method=DeepEnsemble(solver=solver, max_iter=3), n_samples=2,
                                random_state=0, n_jobs=1).fit(X, y)
    # compiled or loaded from the cache, in this process
    fits.append({k.__name__: len(k.stats.cache_hits) + len(k.stats.cache_misses)
                 for k in kernels})
    fits[-1]["warmed_up"] = clf.diagnostics_["compile_time"] > 0
print(json.dumps(fits))
"""


def test_an_lbfgs_fit_compiles_no_epoch_kernel():
    # Full-batch L-BFGS calls the network kernel from Python: a fit that trains by it
    # neither compiles nor loads the minibatch epoch kernel. A later Adam fit in the same
    # process does, in its own warm-up. A fresh process, so that nothing is loaded yet.
    assert _json_of_a_process(_LBFGS_THEN_ADAM) == [
        {"run_epochs": 0, "logp_grad_2_1_0": 1, "warmed_up": True},
        {"run_epochs": 1, "logp_grad_2_1_0": 1, "warmed_up": True},
    ]


_COLD_VI = """
import json, sys, numpy as np
from skbnn import BayesianMLPRegressor
from skbnn.kernels import _compile, density, helper, lbbnn, lrt, optim, vi
from skbnn.methods import LBBNN, VariationalInference
method = LBBNN(max_iter=2) if sys.argv[1] == "lbbnn" else VariationalInference(max_iter=2)
X = np.linspace(-1, 1, 20)[:, None]
BayesianMLPRegressor((2,), method=method, n_samples=10, random_state=0,
                     n_jobs=2).fit(X, X[:, 0])
kernels = (lrt.lrt_backward_for(2), density.forward_batch_for(2), helper.serve)
out = {k.__name__: [len(k.stats.cache_hits), len(k.stats.cache_misses)] for k in kernels}
# compiled in this process: nothing but the network kernel's gradient would compile these
out["here"] = {f.__name__: len(f.signatures) for f in (
    density.logp_grad_for(2, 0, 0), lrt.lrt_backward, optim._sghmc, optim._explore,
    vi._draw_theta, lbbnn._prepare_pass, lbbnn._finish_pass)}
# the variational families' entropies and KL terms compiled here (the helper compiles none)
out["terms"] = {f: len(getattr(vi, f).signatures) for f in
                ("meanfield_terms", "analytic_terms", "_lowrank_entropy", "_entropy_path")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("method", ["vi", "lbbnn"])
def test_a_cold_variational_fit_compiles_the_backward_pass_in_the_helper(tmp_path, method):
    # A cold VI or LBBNN fit compiles the epoch kernel, which calls the local
    # reparameterization's backward pass through its address, while the helper compiles
    # that pass, the team's loop and then the forward pass, which the ELBO's estimate and
    # prediction run: the fit's process loads them (a hit, no miss). It never compiles the network
    # kernel's gradient, nor the optimizers and Monte Carlo prior terms it does not run,
    # nor LBBNN's passes over the weights, which it calls by address as the team's helper
    # does (the helper process compiles them).
    # Nor the low-rank family's entropy: it needs a Cholesky factor and an inverse, whose
    # LAPACK wrappers take seconds to compile, and the mean-field family's epoch kernel
    # (VI's default) is specialized without them; nothing in the cache names them either.
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SKBNN_COMPILE_ASIDE": "1"}
    first, second = _json_of_two_processes(_COLD_VI, env, method)
    here = {"logp_grad_2_0_0": 0, "lrt_backward": 0, "_sghmc": 0, "_explore": 0,
            "_draw_theta": 0, "_prepare_pass": 0, "_finish_pass": 0}  # fmt: skip
    terms = {"meanfield_terms": int(method == "vi"), "analytic_terms": 0,
             "_lowrank_entropy": 0, "_entropy_path": 0}  # fmt: skip
    assert first == {"lrt_backward_2": [1, 0], "forward_batch_2": [1, 0], "serve": [1, 0],
                     "here": here, "terms": terms}  # fmt: skip
    # the second process loads the epoch kernel with its terms linked in: it types none
    assert second == {**first, "terms": dict.fromkeys(terms, 0)}
    cached = " ".join(path.name for path in tmp_path.rglob("*.nbi"))
    assert "lrt_backward" in cached and "_lowrank_entropy" not in cached
    assert "_entropy_path" not in cached and "analytic_terms" not in cached


_ASIDE = """
import json, numpy as np
from skbnn.kernels import _compile, smc
from skbnn.kernels import density as knet
from skbnn.kernels.predict import mixture_quantiles, mixture_quantiles_kernel
from skbnn.log_posterior import LogPosterior
X = np.linspace(-1, 1, 12)[:, None]
target = LogPosterior(X, X[:, 0] ** 2, (3,), "tanh", "gaussian")
tgt = knet.density_target(target.kernel_target(), aside=True)
aside = tgt.density._helper is not None
thetas = target.sample_prior(np.random.default_rng(0), 2)
stats = np.empty((2, 3))
smc.evaluate(thetas, tgt, stats, 0, 2)  # compiled here while the helper compiles logp_grad
# the network kernel for the target's codes, called from Python: the helper's
kernel = knet.logp_grad_for(*knet.target_codes(tgt))
direct = np.empty(3)
kernel(thetas[1], target.kernel_target(), target.workspace(), np.empty(0), direct, False)
# the helper goes on with prediction's kernels; the second process loads them
for helper in _compile._BACKGROUND:
    helper.wait()
predict = knet.forward_batch_for(2)
out = np.empty((2, 1, 12))
predict(thetas, target.XT, target.layout.sizes, target.layout.offsets, 12, out)
q = np.empty((12, 2))
mixture_quantiles(out[:, 0].T.copy(), np.ones((1, 2)), np.full(2, 0.5), np.array([0.1, 0.9]), q)
print(json.dumps({"aside": aside, "same": stats[1].tolist() == direct.tolist(),
                  "logp_grad": [len(kernel.stats.cache_hits), len(kernel.stats.cache_misses)],
                  "predict_misses": len(predict.stats.cache_misses)
                  + len(mixture_quantiles_kernel.stats.cache_misses)}))
"""


def test_a_cold_process_compiles_the_network_kernel_in_a_helper(tmp_path):
    # On an empty cache, the first kernel that takes a DensityTarget compiles while a helper
    # process compiles the network kernel into the cache: this process then loads it (a
    # cache hit, no miss) instead of compiling it, and computes with it as it would have.
    # The helper then compiles prediction's kernels for the types prediction passes. A
    # second process finds everything cached and starts no helper.
    import os

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SKBNN_COMPILE_ASIDE": "1"}
    results = _json_of_two_processes(_ASIDE, env)
    # the first process's prediction kernels are the helper's (loaded after it ended)
    assert results[0] == {"aside": True, "same": True, "logp_grad": [1, 0], "predict_misses": 0}
    assert results[1] == {"aside": False, "same": True, "logp_grad": [1, 0], "predict_misses": 0}


def test_the_helper_process_imports_the_kernels_without_scikit_learn():
    # The helper's start is on a cold fit's critical path: it needs numba and the kernels,
    # not skbnn's estimators and scikit-learn (1.2 s of imports)
    import subprocess
    import sys

    from skbnn.kernels import _compile

    program = _compile._COMPILE_ASIDE.split("jobs, activation", 1)[0] + (
        "print('sklearn' in sys.modules, 'skbnn.estimators' in sys.modules,"
        " density.logp_grad.__module__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["False", "False", "skbnn.kernels.density"]


def test_compile_for_compiles_a_kernel_without_asking_for_the_density(monkeypatch):
    # A fit's warm-up compiles its kernels from their arguments' types while the helper
    # process compiles the network kernel; only calling one asks for the network kernel's
    # address (and waits for the helper).
    import numpy as np
    import pytest

    from skbnn.kernels import _compile
    from skbnn.kernels import density as knet
    from skbnn.kernels import smc as ksmc
    from skbnn.kernels._compile import compile_for
    from skbnn.log_posterior import LogPosterior

    X = np.linspace(-1, 1, 6)[:, None]
    target = LogPosterior(X, X[:, 0], (2,), "tanh", "gaussian")
    tgt = knet.density_target(target.kernel_target())
    source = knet.density_source(knet.target_codes(tgt))
    density = _compile.CompiledKernel(tgt.density.signature(), source)
    monkeypatch.setattr(density, "resolve", lambda: pytest.fail("the address was asked for"))
    unresolved = tgt._replace(density=density)
    thetas, stats = np.zeros((2, target.n_params)), np.zeros((2, 3))
    compile_for(ksmc.evaluate, thetas, unresolved, stats, 0, 2)
    assert ksmc.evaluate.signatures
    with pytest.raises(pytest.fail.Exception, match="address was asked"):
        ksmc.evaluate(thetas, unresolved, stats, 0, 2)


def test_compiling_pauses_the_garbage_collector_and_restores_its_state():
    # numba's compiler leaves cyclic garbage that every automatic full collection would walk
    # the whole process for; compile_once pauses collection while it compiles, and leaves
    # it as it found it, also when the compile fails
    import gc

    import pytest

    from skbnn.kernels._compile import compile_once

    class Kernel:
        signatures: list = []

    seen = []
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            compile_once([Kernel()], lambda: seen.append(gc.isenabled()))
            assert gc.isenabled() is enabled

            def fails():
                raise RuntimeError("compile failed")

            with pytest.raises(RuntimeError, match="compile failed"):
                compile_once([Kernel()], fails)
            assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False]


_ONE_CODE = """
import sys, numpy as np
from skbnn.kernels import density as knet
from skbnn.log_posterior import LogPosterior
X = np.linspace(-1, 1, 12)[:, None]
target = LogPosterior(X, X[:, 0] ** 2, (3,), "tanh", "gaussian")
# the same steps for either code (as a fit's warm-up problem does), so numba numbers the
# kernel alike in both processes
knet.density_target(target.kernel_target(), codes=(int(sys.argv[1]), 0, 0))
"""

_BOTH_CODES = """
import json, numpy as np
from skbnn.kernels import smc
from skbnn.kernels import density as knet
from skbnn.log_posterior import LogPosterior
X = np.linspace(-1, 1, 12)[:, None]
same = []
for act in ("tanh", "relu"):
    target = LogPosterior(X, X[:, 0] ** 2, (3,), act, "gaussian")
    tgt = knet.density_target(target.kernel_target())
    thetas = target.sample_prior(np.random.default_rng(0), 2)
    stats = np.empty((2, 3))
    smc.evaluate(thetas, tgt, stats, 0, 2)  # through the density's address
    direct = np.empty(3)
    # called from Python: the kernel compiled for this activation (the same bits)
    tgt.density.dispatcher()(thetas[1], target.kernel_target(), target.workspace(),
                             np.empty(0), direct, False)
    same.append(stats[1].tolist() == direct.tolist())
print(json.dumps(same))
"""


def test_kernels_for_two_codes_compiled_in_two_processes_keep_their_own_addresses(tmp_path):
    # The kernels logp_grad_for compiles for the tanh and the ReLU networks, each compiled
    # in a fresh process of its own and both loaded from the cache into a third, each
    # compute their own network's density through their address. (While they were closures
    # of one name, a full test run once sampled a logistic-prior classifier with another
    # code's kernel, the likely cause two cached kernels given one symbol; this test did not
    # reproduce that with the old names. The kernels now have a name per code.)
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "SKBNN_COMPILE_ASIDE": "0"}
    for act in ("2", "1"):  # tanh, then ReLU
        subprocess.run([sys.executable, "-c", _ONE_CODE, act], env=env, check=True)
    out = subprocess.run(
        [sys.executable, "-c", _BOTH_CODES], env=env, check=True, capture_output=True, text=True
    ).stdout
    assert json.loads(out.strip().splitlines()[-1]) == [True, True]


def test_looking_up_a_prediction_kernel_waits_only_for_the_helpers_compiling_it(monkeypatch):
    # a prediction right after a cold fit waits for the helper process that compiles its
    # kernel into the cache, rather than compile it a second time; a kernel compiled in
    # this process already, or one no helper compiles, waits for nothing
    from types import SimpleNamespace

    from skbnn.kernels import _compile

    waited = []

    def helper(pid):
        return SimpleNamespace(pid=pid, wait=lambda timeout: waited.append(pid))

    def kernel(name, compiled=False):
        return SimpleNamespace(
            signatures=[()] if compiled else [], py_func=SimpleNamespace(__qualname__=name)
        )

    monkeypatch.setattr(_compile, "_BACKGROUND", [helper(1), helper(2)])
    monkeypatch.setattr(
        _compile,
        "_COMPILES_AFTER",
        {1: frozenset({"forward_batch_2", "mixture_quantiles_kernel"}),
         2: frozenset({"forward_batch_1", "mixture_quantiles_kernel"})},
    )  # fmt: skip
    _compile.wait_for_helpers(kernel("forward_batch_2"))
    assert waited == [1]
    _compile.wait_for_helpers(kernel("mixture_quantiles_kernel"))
    assert waited == [1, 1, 2]
    _compile.wait_for_helpers(kernel("forward_batch_2", compiled=True), kernel("other"))
    assert waited == [1, 1, 2]
