"""The team's helper thread (skbnn.kernels.team): half of each wide product, gather and Adam
step of a lone network on a second core, with the same bits as on one."""

import multiprocessing
import sys
import threading

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels import helper, team
from skbnn.kernels._compile import DISABLED, call
from skbnn.kernels.gemm import gemm
from skbnn.methods import LBBNN, DeepEnsemble, Laplace, VariationalInference

pytestmark = pytest.mark.skipif(DISABLED, reason="the team runs compiled kernels only")


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "skbnn-team"]


def _product(trans_a, trans_b, m, n, k, weights):
    # op(A) op(B) through the kernel, in column-major buffers with an offset and padded
    # leading dimensions, as the network kernels hold them
    rng = np.random.default_rng(0)
    opa, opb = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    a, b = (opa.T if trans_a else opa), (opb.T if trans_b else opb)
    lda, ldb, ldc = a.shape[0] + 3, b.shape[0] + 1, m + 2
    A = np.zeros(5 + lda * a.shape[1])
    B = np.zeros(7 + ldb * b.shape[1])
    C = np.full(2 + ldc * n, 0.5)
    for j in range(a.shape[1]):
        A[5 + j * lda : 5 + j * lda + a.shape[0]] = a[:, j]
    for j in range(b.shape[1]):
        B[7 + j * ldb : 7 + j * ldb + b.shape[0]] = b[:, j]
    call(gemm, trans_a, trans_b, m, n, k, 2.0, A, 5, lda, B, 7, ldb, 0.25, C, 2, ldc, weights)
    out = np.stack([C[2 + j * ldc : 2 + j * ldc + m] for j in range(n)], axis=1)
    return out, 2.0 * opa @ opb + 0.125, C


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("n", [37, 90])
def test_split_product_is_the_product_with_and_without_a_helper(trans_a, trans_b, n):
    weights = team.SPLIT_MIN_WEIGHTS
    alone, expected, buffer_alone = _product(trans_a, trans_b, 11, n, 13, weights)
    np.testing.assert_allclose(alone, expected, rtol=1e-12, atol=1e-12)
    before = helper.served[0]
    with helper.team():
        helped, _, buffer_helped = _product(trans_a, trans_b, 11, n, 13, weights)
    assert helper.served[0] > before
    # the same two BLAS calls either way, and nothing outside C's columns written
    np.testing.assert_array_equal(buffer_helped, buffer_alone)
    assert buffer_alone[0] == buffer_alone[1] == 0.5


def test_team_stops_its_helper_also_on_an_error():
    with pytest.raises(RuntimeError, match="inside"), helper.team():
        assert len(_helpers()) == 1
        raise RuntimeError("inside")
    assert not _helpers()
    assert team.CTL[0] == team.OFF


def test_nested_teams_share_one_helper():
    with helper.team():
        with helper.team():
            assert len(_helpers()) == 1
        assert len(_helpers()) == 1
    assert not _helpers()


def _wide_data(classes=3, rows=300, features=180):
    # a first layer of 180 x 256 and a second of 256 x 256 weights: products, gathers and
    # Adam steps all reach the team's thresholds
    rng = np.random.default_rng(1)
    X = rng.standard_normal((rows, features))
    y = (X[:, :classes] @ rng.standard_normal(classes)).argsort().argsort() * classes // rows
    return X, y


LONE_METHODS = {
    "vi": lambda: VariationalInference(max_iter=2, batch_size=100),
    "lbbnn": lambda: LBBNN(max_iter=2, batch_size=100),
    "lbbnn_flow": lambda: LBBNN(posterior="flow", max_iter=2, batch_size=100),
    "ensemble": lambda: DeepEnsemble(solver="adam", max_iter=2, batch_size=100),
}


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("name", sorted(LONE_METHODS))
def test_a_lone_network_has_the_same_bits_on_two_cores(name):
    X, y = _wide_data()
    n_samples = 1 if name == "ensemble" else 10
    fits = {}
    for n_jobs in (1, 2):
        before = helper.served[0]
        fits[n_jobs] = BayesianMLPClassifier(
            (256, 256), activation="relu", method=LONE_METHODS[name](), n_samples=n_samples,
            random_state=0, n_jobs=n_jobs,
        ).fit(X, y)  # fmt: skip
        # one core: no helper; two: the helper took its share of every step
        assert (helper.served[0] > before) == (n_jobs == 2)
        assert not _helpers()
    np.testing.assert_array_equal(fits[1].posterior_.thetas, fits[2].posterior_.thetas)
    np.testing.assert_array_equal(fits[1].predict_proba(X), fits[2].predict_proba(X))


def test_a_tail_team_starts_once_a_core_would_idle():
    # three tasks on two jobs: a helper once none waits and one runs alone, until the end
    def start(idle):
        task = idle.task()
        task.__enter__()
        return task

    with helper.TailTeam(3, 2) as idle:
        first, second = start(idle), start(idle)
        first.__exit__(None, None, None)  # the third still waits
        assert not _helpers()
        third = start(idle)
        assert not _helpers()
        second.__exit__(None, None, None)  # the third runs alone
        assert len(_helpers()) == 1
        third.__exit__(None, None, None)
        assert len(_helpers()) == 1
    assert not _helpers()
    # fewer tasks than jobs: from the start
    with helper.TailTeam(1, 2):
        assert len(_helpers()) == 1
    assert not _helpers()
    # one job: never
    with helper.TailTeam(2, 1) as idle:
        only = start(idle)
        only.__exit__(None, None, None)
        assert not _helpers()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_an_ensemble_of_more_members_than_cores_has_the_same_bits_on_two():
    # three members on two cores: the last trains with the idle core's helper
    X, y = _wide_data()
    fits = [
        BayesianMLPClassifier(
            (256, 256),
            activation="relu",
            n_samples=3,
            random_state=0,
            n_jobs=n_jobs,
            method=DeepEnsemble(solver="adam", max_iter=3, batch_size=100),
        ).fit(X, y)  # fmt: skip
        for n_jobs in (1, 2)
    ]
    assert not _helpers()
    np.testing.assert_array_equal(fits[0].posterior_.thetas, fits[1].posterior_.thetas)
    np.testing.assert_array_equal(fits[0].predict_proba(X), fits[1].predict_proba(X))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_laplace_map_has_the_same_bits_on_two_cores():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 260))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(200)
    fits = [
        BayesianMLPRegressor(
            (256,),
            method=Laplace(
                hessian="kron", solver="adam", max_iter=2, batch_size=50, max_prior_updates=1
            ),
            random_state=0,
            n_jobs=n_jobs,
        ).fit(X, y)  # fmt: skip
        for n_jobs in (1, 2)
    ]
    np.testing.assert_array_equal(fits[0].posterior_.mean, fits[1].posterior_.mean)
    np.testing.assert_array_equal(fits[0].predict(X), fits[1].predict(X))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_two_lone_fits_at_once_share_the_helper_and_keep_their_bits():
    X, y = _wide_data()

    def fit(n_jobs):
        return BayesianMLPClassifier(
            (256, 256), activation="relu", method=LONE_METHODS["vi"](), n_samples=5,
            random_state=0, n_jobs=n_jobs,
        ).fit(X, y)  # fmt: skip

    alone = fit(1)
    out = [None, None]

    def run(i):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out[i] = fit(2)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for fitted in out:
        np.testing.assert_array_equal(fitted.posterior_.thetas, alone.posterior_.thetas)
    assert not _helpers()


def test_single_threaded_blas_holds_until_the_last_thread_leaves():
    # two fits on two threads: the first to finish must not give BLAS its threads back
    # while the other still trains (its products would then run threaded, other bits),
    # and the last out must restore them, whichever thread set them
    from threadpoolctl import threadpool_info

    from skbnn.posterior import single_threaded_blas

    def blas_threads():
        return {d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"}

    def on_a_thread(body):
        t = threading.Thread(target=body)
        t.start()
        return t

    before = blas_threads()
    if not before:
        pytest.skip("no BLAS whose threads threadpoolctl sets")
    seen = []

    def alone():
        with single_threaded_blas():
            seen.append(blas_threads())

    with single_threaded_blas():  # the main thread first, then a thread alone
        pass
    on_a_thread(alone).join()
    assert seen == [{1}]
    inside, release = threading.Event(), threading.Event()

    def second():
        with single_threaded_blas():
            inside.set()
            release.wait()

    try:
        with single_threaded_blas():
            t = on_a_thread(second)
            inside.wait()
        still = blas_threads()
    finally:
        release.set()
        t.join()
    assert still == {1}  # the second thread was still inside
    assert blas_threads() == before


def _wide_product_in_child(queue):
    out, expected, _ = _product(0, 1, 7, 64, 9, team.SPLIT_MIN_WEIGHTS)
    queue.put(bool(np.allclose(out, expected)))


@pytest.mark.skipif(sys.platform != "linux", reason="fork is the Linux start method")
def test_a_child_forked_during_a_team_computes_alone():
    # the child has no helper thread: a posted product there would wait for ever
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with helper.team():
        child = ctx.Process(target=_wide_product_in_child, args=(queue,))
        child.start()
        child.join(timeout=120)
    assert child.exitcode == 0
    assert queue.get(timeout=5)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_lbbnn_passes_over_the_weights_run_on_the_helper_too():
    # a layer of 2^16 weights or more: the mean-field step's two passes over its weights
    # split in fixed halves, so the fit is the same with the helper and without; the fit
    # registers the passes the helper calls (none is until then)
    X, y = _wide_data()
    team.TASKS[:] = 0
    fits = [
        BayesianMLPClassifier(
            (256, 256),
            activation="relu",
            method=LBBNN(max_iter=2, batch_size=100),
            n_samples=5,
            random_state=4,
            n_jobs=n_jobs,
        ).fit(X, y)  # fmt: skip
        for n_jobs in (1, 2)
    ]
    np.testing.assert_array_equal(fits[0].posterior_.thetas, fits[1].posterior_.thetas)
    assert fits[0].elbo_ == fits[1].elbo_
    assert np.isfinite(fits[0].elbo_)
    assert DISABLED or (team.TASKS[team.PREPARE] != 0 and team.TASKS[team.FINISH] != 0)


_FREED_BLOCK_CHILD = """
import numpy as np
from numba import njit
from skbnn.kernels import helper, lbbnn, vi

@njit
def step(vparams, p, n_w, work):
    value = lbbnn.spike_slab_prepare(vparams, p, n_w, work)
    return value, lbbnn.spike_slab_finish(vparams, p, n_w, work, 1.0)

p = 2**16 + 3
n_w = p - 1
rng = np.random.default_rng(0)
vparams = 0.3 * rng.standard_normal(3 * p)
work = vi.new_work(p, 0, psi=np.full(p, 0.5), slab=np.ones(p))
lbbnn.register_tasks()
served = helper.served[0]
with helper.team():
    helped = step(vparams, p, n_w, work), work.glam.copy()
assert helper.served[0] > served
alone = step(vparams, p, n_w, work), work.glam.copy()
assert helped[0] == alone[0] and np.array_equal(helped[1], alone[1])
print("ok")
"""


@pytest.mark.skipif(DISABLED, reason="no helper without the JIT")
def test_the_helper_reads_the_lbbnn_pass_addresses_before_they_are_freed(tmp_path):
    # the LBBNN passes hand the helper the address of a small array of their views'
    # addresses; numba frees an array after its last use in a kernel, and its debug
    # runtime fills freed memory with 0xDE: a helper that read the array after the poster
    # freed it would follow those bytes as addresses and crash
    import os
    import subprocess

    env = dict(os.environ, NUMBA_DEBUG_NRT="1", NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _FREED_BLOCK_CHILD], env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().endswith("ok")


_SERVE_CHILD = """
import numpy as np
from skbnn.kernels import helper, lbbnn, vi

helper.serve.compile(())
print(len(lbbnn._prepare_loop.signatures), len(lbbnn._finish_pass.signatures))
# an LBBNN pass with no task registered is done whole by its poster, with the same bits
p = 2**16 + 3
vparams = 0.3 * np.random.default_rng(0).standard_normal(3 * p)
work = vi.new_work(p, 0, psi=np.full(p, 0.5), slab=np.ones(p))
served = helper.served[0]
with helper.team():
    alone = lbbnn.spike_slab_prepare(vparams, p, p - 1, work), work.glam.copy()
print(helper.served[0] - served)
lbbnn.register_tasks()
with helper.team():
    helped = lbbnn.spike_slab_prepare(vparams, p, p - 1, work), work.glam.copy()
print(helper.served[0] - served)
print(alone[0] == helped[0] and np.array_equal(alone[1], helped[1]))
"""


@pytest.mark.skipif(DISABLED, reason="no helper without the JIT")
def test_the_helper_links_no_lbbnn_pass_until_one_is_registered(tmp_path):
    # every method with a team compiles the helper's loop: compiled on an empty cache, it
    # must not compile LBBNN's passes with it, and their posters must not post them until
    # they are registered
    import os
    import subprocess

    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    run = subprocess.run([sys.executable, "-c", _SERVE_CHILD], env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split("\n")[:4] == ["0 0", "0", "1", "True"], run.stdout
