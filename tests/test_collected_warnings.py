"""Warnings a fit gathers to raise or drop later (a trial fit not kept, a screen cut short)
stay its own: fits in other threads raise theirs meanwhile."""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from skbnn import BayesianMLPRegressor
from skbnn.exceptions import DataScaleWarning, collected_warnings, raise_warnings, warn
from skbnn.methods import Laplace
from skbnn.model_selection import _fit_candidate


def _data(n=200):
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (n, 3))
    return X, np.sin(X[:, 0]) + 0.3 * rng.standard_normal(n)


def _short_laplace():
    # one Adam epoch: training stops short, and Laplace gathers that warning while it
    # chooses among its updates, then raises the best update's
    method = Laplace(hessian="diag", solver="adam", max_iter=1)
    return BayesianMLPRegressor(hidden_layer_sizes=(8,), method=method, random_state=0)


def test_gathered_warnings_are_the_threads_own():
    inside = threading.Event()
    done = threading.Event()

    def gather():
        with collected_warnings() as caught:
            inside.set()
            done.wait(10)
            warn("gathered", ConvergenceWarning)
        return caught

    with warnings.catch_warnings(record=True) as raised:
        warnings.simplefilter("always")
        with ThreadPoolExecutor(1) as pool:
            future = pool.submit(gather)
            inside.wait(10)
            warn("raised meanwhile", ConvergenceWarning)
            done.set()
            caught = future.result()
    assert [str(w.message) for w in raised] == ["raised meanwhile"]
    assert caught == [("gathered", ConvergenceWarning)]
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        raise_warnings(caught)
    assert [(str(w.message), w.category) for w in again] == caught
    assert again[0].filename == __file__


def test_laplace_fits_in_threads_each_raise_their_warning():
    X, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _short_laplace().fit(X, y)
    alone = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert len(alone) == 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda s: _short_laplace().fit(X, y + s), range(4)))
    found = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert found == alone * 4


def test_a_screen_fit_drops_its_convergence_warnings_and_keeps_the_others():
    X, y = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit_candidate(_short_laplace(), 100 * X + 50, y, {}, screen=True)
    assert [w.category for w in caught] == [DataScaleWarning]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit_candidate(_short_laplace(), X, y, {}, screen=False)
    assert len(caught) == 1 and issubclass(caught[0].category, ConvergenceWarning)
