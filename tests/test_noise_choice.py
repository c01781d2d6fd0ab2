"""The deep ensemble's ``noise_df="auto"``: the Gaussian or a Student-t noise, chosen by the
members' held-out rows."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.stats
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.kernels.likelihoods import HETERO_MIN_VAR
from skbnn.log_posterior import LogPosterior
from skbnn.methods import DeepEnsemble
from skbnn.methods.ensemble import AUTO_NOISE_DF, held_out_gain
from skbnn.posterior import ForwardPass


def _data(seed, n, df=None):
    # a smooth function; the noise a Student-t of df degrees of freedom, or the Gaussian
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, (n, 3))
    f = 2.0 * np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    noise = rng.standard_normal(n) if df is None else rng.standard_t(df, n)
    return X, f + 0.5 * noise


def _fit(X, y, noise_df, **knobs):
    method = DeepEnsemble(noise_df=noise_df, **knobs)
    return BayesianMLPRegressor(hidden_layer_sizes=(8,), method=method, random_state=0).fit(X, y)


def test_the_choice_is_one_of_the_two_fits_bit_for_bit():
    # whichever noise the held-out rows choose, the fit is the one that noise gives alone:
    # the same seeds, the same members, the same predictions
    X, y = _data(0, 300, df=3.0)
    auto = _fit(X, y, "auto")
    d = auto.diagnostics_
    assert d["noise"] in ("gaussian", "student_t")
    assert d["noise_df_rows"] == 5 * round(0.1 * 300)
    alone = _fit(X, y, AUTO_NOISE_DF if d["noise"] == "student_t" else None)
    assert auto.predictive_.noise_df == alone.predictive_.noise_df
    np.testing.assert_array_equal(auto.posterior_.thetas, alone.posterior_.thetas)
    mean, std = auto.predict(X[:20], return_std=True)
    np.testing.assert_array_equal(mean, alone.predict(X[:20]))
    np.testing.assert_array_equal(std, alone.predict_std(X[:20]))
    # both fits' training is counted
    gaussian, student = _fit(X, y, None), _fit(X, y, AUTO_NOISE_DF)
    both = gaussian.diagnostics_["n_grad_evals"] + student.diagnostics_["n_grad_evals"]
    assert d["n_grad_evals"] == both


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_the_gain_is_each_members_held_out_density_t_minus_gaussian():
    # held_out_gain against scipy's densities, member by member, row by row
    X, y = _data(1, 200, df=3.0)
    members = {}
    for df in (None, AUTO_NOISE_DF):
        target = LogPosterior(X, y, (4,), "tanh", "heteroscedastic", noise_df=df)
        members[df], _ = _members(DeepEnsemble(max_iter=30), target)
    gaussian_target = LogPosterior(X, y, (4,), "tanh", "heteroscedastic")
    gain, se, n = held_out_gain(gaussian_target, members[None], members[AUTO_NOISE_DF])
    net = ForwardPass(gaussian_target.layout, gaussian_target.activation_code)
    diffs = []
    for g, t in zip(members[None], members[AUTO_NOISE_DF], strict=True):
        rows = g.val_rows
        np.testing.assert_array_equal(rows, t.val_rows)
        dens = []
        for m, df in ((g, None), (t, AUTO_NOISE_DF)):
            f = np.concatenate([out for _, out in net.outputs(X[rows], m.theta[None])], axis=-1)
            scale = np.sqrt(np.logaddexp(0.0, f[0, 1]) + HETERO_MIN_VAR)
            dist = scipy.stats.norm if df is None else scipy.stats.t(df)
            dens.append(dist.logpdf((y[rows] - f[0, 0]) / scale) - np.log(scale))
        diffs.append(dens[1] - dens[0])
    d = np.concatenate(diffs)
    assert n == d.size
    np.testing.assert_allclose(gain, d.mean(), rtol=1e-10)
    np.testing.assert_allclose(se, d.std(ddof=1) / np.sqrt(d.size), rtol=1e-10)


def _members(method, target):
    from skbnn.methods._optim import glorot_init

    def start(target, rng):
        return glorot_init(target, rng), None, None

    return method._train_members(target, 3, 0, 1, 0, start)


@pytest.mark.statistical
def test_heavy_tails_choose_the_t_and_gaussian_noise_the_gaussian(seed):
    # On 1,500 rows (750 member-row pairs held out), over eight data seeds, the gain was
    # 0.37-0.77 nats per row for noise of 2 degrees of freedom (no seed near zero: a
    # normal fit across the seeds puts a gain below zero under 1e-4), and -0.026 to
    # -0.002 (sd 0.008) for Gaussian noise, where the normal fit puts a gain above zero
    # near 1e-2 a fit; so the Gaussian is asked of at least two fits in three (about
    # 3e-4). The test's false-alarm probability is below 5e-4.
    X, y = _data(seed + 2, 1500, df=2.0)
    heavy = _fit(X, y, "auto").diagnostics_
    assert heavy["noise"] == "student_t", heavy
    light = [_fit(*_data(seed + 3 + i, 1500), "auto").diagnostics_ for i in range(3)]
    assert sum(d["noise"] == "gaussian" for d in light) >= 2, light


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_without_held_out_rows_it_is_the_gaussian_trained_once():
    X, y = _data(4, 200, df=3.0)
    auto = _fit(X, y, "auto", early_stopping=False, max_iter=50)
    gaussian = _fit(X, y, None, early_stopping=False, max_iter=50)
    d = auto.diagnostics_
    assert d["noise"] == "gaussian" and d["noise_df_rows"] == 0
    assert np.isnan(d["noise_df_gain"])
    assert d["n_grad_evals"] == gaussian.diagnostics_["n_grad_evals"]
    assert auto.predictive_.noise_df is None


def test_only_the_chosen_fits_warnings_are_raised():
    # both fits stop at a one-epoch budget; the user hears the kept one's warning once
    X, y = _data(5, 200, df=3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(X, y, "auto", max_iter=1)
    found = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(found) == 1, [str(w.message) for w in found]


def test_auto_is_the_gaussian_where_the_noise_is_not_inferred():
    X, y = _data(6, 80)
    clf = BayesianMLPClassifier(hidden_layer_sizes=(3,), method=DeepEnsemble(noise_df="auto"))
    assert "noise" not in clf.fit(X, y > 0).diagnostics_
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(3,), method=DeepEnsemble(noise_df="auto"), noise_std=0.5
    )
    assert reg.fit(X, y).predictive_.noise_df is None


def test_with_noise_df_needs_the_heteroscedastic_likelihood():
    X = np.zeros((4, 1))
    target = LogPosterior(X, X[:, 0], (), "tanh", "gaussian")
    with pytest.raises(ValueError, match="only the heteroscedastic likelihood"):
        target.with_noise_df(5.0)
    hetero = LogPosterior(X, X[:, 0], (), "tanh", "heteroscedastic")
    t = hetero.with_noise_df(5.0)
    assert t.noise_df == 5.0 and t._cfg("noise_df") == 5.0
    assert hetero.noise_df is None and hetero._cfg("noise_df") == 0.0
    assert t.with_noise_df(None)._cfg("noise_df") == 0.0


@pytest.mark.parametrize("random_state", [None, "RandomState"])
def test_both_fits_share_their_seeds_whatever_the_random_state(random_state):
    # a random_state that gives new seeds at each call (None, a RandomState) must still
    # give both fits the same ones: every member then meets its partner
    X, y = _data(7, 300, df=3.0)
    state = np.random.RandomState(0) if random_state == "RandomState" else None
    method = DeepEnsemble(noise_df="auto")
    est = BayesianMLPRegressor(hidden_layer_sizes=(8,), method=method, random_state=state)
    d = est.fit(X, y).diagnostics_
    assert d["noise_df_rows"] == 5 * round(0.1 * 300) and np.isfinite(d["noise_df_gain"])


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fits_in_threads_each_raise_their_warning():
    # the warnings are raised, not caught and raised again: a fit in another thread
    # loses none of its own
    from concurrent.futures import ThreadPoolExecutor

    X, y = _data(8, 200, df=3.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda s: _fit(X, y + s, "auto", max_iter=1), range(4)))
    found = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(found) == 4, [str(w.message) for w in found]


def test_a_t_fit_whose_members_all_diverge_leaves_the_gaussian(monkeypatch):
    X, y = _data(9, 200, df=3.0)
    train = DeepEnsemble._train_members

    def t_diverges(self, target, *args, **kwargs):
        if target.noise_df is not None:
            raise ValueError("the loss of every one of the members diverged")
        return train(self, target, *args, **kwargs)

    monkeypatch.setattr(DeepEnsemble, "_train_members", t_diverges)
    est = _fit(X, y, "auto")
    assert est.diagnostics_["noise"] == "gaussian" and est.predictive_.noise_df is None
    assert est.diagnostics_["noise_df_rows"] == 0
