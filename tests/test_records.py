"""A run's figures are typed records (skbnn/methods/_records.py): each method declares its
figures once, a misspelt one fails where it is written, and ``diagnostics_`` is the
record's mapping, the same for every method as a record read back from it."""

import ast
import dataclasses
import pathlib
import re

import numpy as np
import pytest
from sklearn.datasets import load_iris

import skbnn
from skbnn import BayesianMLPClassifier, BayesianMLPRegressor
from skbnn.methods import LBBNN, NUTS, SMC, SWAG, Laplace, RandomizedMAP, VariationalInference
from skbnn.methods._records import (
    ChainDiagnostics,
    LaplaceDiagnostics,
    LBBNNDiagnostics,
    ModeFigures,
    PredictiveModes,
    Record,
    RMSDiagnostics,
    SMCDiagnostics,
    SWAGDiagnostics,
    TrainingDiagnostics,
    VIDiagnostics,
)

ROOT = pathlib.Path(skbnn.__file__).parent


def test_a_record_maps_the_figures_it_reports_and_reads_them_back():
    diag = ChainDiagnostics(
        n_chains=2,
        rhat_loglik=1.01,
        modes=[ModeFigures(chains=np.array([0]), weight=0.25), ModeFigures(weight=0.75)],
        predictive_modes=PredictiveModes(mean=np.zeros((2, 1, 1))),
    )
    out = diag.as_dict()
    # a figure left at None was not made: it is not in the mapping, nested ones neither
    assert set(out) == {"n_chains", "rhat_loglik", "modes", "predictive_modes"}
    assert out["modes"] == [{"chains": np.array([0]), "weight": 0.25}, {"weight": 0.75}]
    assert set(out["predictive_modes"]) == {"mean"}
    back = ChainDiagnostics.from_dict(out)
    assert isinstance(back.modes[1], ModeFigures) and back.modes[1].weight == 0.75
    assert isinstance(back.predictive_modes, PredictiveModes)
    assert back.as_dict().keys() == out.keys()


def test_a_misspelt_figure_fails_where_it_is_written():
    diag = ChainDiagnostics()
    with pytest.raises(AttributeError):
        diag.rhat_loglk = 1.0  # slots: no new attribute by accident
    with pytest.raises(TypeError, match=r"ChainDiagnostics has no figures named \['rhat'\]"):
        ChainDiagnostics.from_dict({"n_chains": 4, "rhat": 1.0})
    with pytest.raises(TypeError):
        ChainDiagnostics(divergence=3)


def test_extending_and_updating_keep_to_the_record_types():
    train = TrainingDiagnostics(n_members=1, compile_time=1.0)
    vi = VIDiagnostics.extending(train, elbo_se=0.5, compile_time=2.0)
    assert (vi.n_members, vi.elbo_se, vi.compile_time) == (1, 0.5, 2.0)
    with pytest.raises(TypeError, match="does not extend"):
        ChainDiagnostics.extending(train)
    diag = ChainDiagnostics(n_chains=4, divergences=1)
    diag.update(ChainDiagnostics(divergences=3, stopped_because="max_time"))
    assert (diag.n_chains, diag.divergences, diag.stopped_because) == (4, 3, "max_time")
    with pytest.raises(TypeError, match="cannot take"):
        diag.update(train)


def test_every_record_is_a_slotted_dataclass():
    for cls in (ChainDiagnostics, SMCDiagnostics, LaplaceDiagnostics, LBBNNDiagnostics,
                SWAGDiagnostics, RMSDiagnostics, ModeFigures, PredictiveModes):  # fmt: skip
        assert dataclasses.is_dataclass(cls) and "__slots__" in vars(cls)
        assert issubclass(cls, Record)


def _x_y():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 2))
    return X, X[:, 0] - 0.5 * X[:, 1] + 0.1 * rng.standard_normal(40)


@pytest.mark.parametrize(
    ("method", "record"),
    [
        (NUTS(n_warmup=30, n_modes=2), ChainDiagnostics),
        (SMC(max_stages=5), SMCDiagnostics),
        (Laplace(), LaplaceDiagnostics),
        (SWAG(swa_epochs=5), SWAGDiagnostics),
        (RandomizedMAP(), RMSDiagnostics),
        (VariationalInference(max_iter=5), VIDiagnostics),
        (LBBNN(max_iter=5), LBBNNDiagnostics),
    ],
    ids=lambda v: type(v).__name__,
)
@pytest.mark.filterwarnings("ignore")
def test_diagnostics_is_the_mapping_of_the_methods_record(method, record):
    est = BayesianMLPRegressor((3,), method=method, n_samples=20, random_state=0)
    est.fit(*_x_y())
    diag = est.diagnostics_
    assert isinstance(diag, dict) and "wall_time" in diag
    # every figure the estimator publishes is one the method's record declares
    assert record.from_dict(diag).as_dict().keys() == diag.keys()


@pytest.mark.filterwarnings("ignore")
def test_the_laplace_evidence_figures_are_in_the_targets_units():
    # targets 4 times larger standardize to the same bits (a power of two scales every
    # rounding alike), so the run is the same: its evidences, log_evidence_ and the
    # record's, are n log 4 lower, the density's Jacobian
    X, y = _x_y()
    fits = [
        BayesianMLPRegressor((3,), method=Laplace(), random_state=0).fit(X, scale * y)
        for scale in (1.0, 4.0)
    ]
    shift = -len(y) * np.log(4.0)
    assert np.isclose(fits[1].log_evidence_ - fits[0].log_evidence_, shift, rtol=1e-12)
    for key in ("evidence_trace", "init_log_evidence"):
        a, b = (f.diagnostics_[key] for f in fits)
        np.testing.assert_allclose(b - a, shift, rtol=1e-12)


@pytest.mark.filterwarnings("ignore")
def test_a_classifiers_diagnostics_come_from_its_record_too():
    X, y = load_iris(return_X_y=True)
    est = BayesianMLPClassifier((3,), method=NUTS(n_warmup=30), n_samples=20, random_state=0)
    est.fit((X - X.mean(0)) / X.std(0), y)
    diag = est.diagnostics_
    back = ChainDiagnostics.from_dict(diag)
    assert back.predictive_modes.density is None  # a classifier's predictive has no noise
    assert back.as_dict().keys() == diag.keys()


def test_no_module_indexes_a_runs_figures_by_string():
    # the methods read and write their figures by attribute; only the estimator's public
    # diagnostics_ is a mapping
    pattern = re.compile(r"\b(diag|diagnostics|out|train_diag)\[[\"']")
    offenders = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and pattern.match(ast.unparse(node)):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {ast.unparse(node)}")
    assert not offenders, offenders
