"""Typed records of a run's figures: what each method reports, each name declared once.

A method builds its record field by field (slots: a misspelt figure is an AttributeError,
not a new key), the convergence checks read it by attribute, and the estimator publishes
:meth:`Record.as_dict` as ``diagnostics_``, the mapping scikit-learn users expect. A
field left at None is a figure the run did not make, and is not in the mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

import numpy as np

__all__ = [
    "ChainDiagnostics",
    "EnsembleDiagnostics",
    "LBBNNDiagnostics",
    "LaplaceDiagnostics",
    "ModeFigures",
    "PredictiveModes",
    "RMSDiagnostics",
    "Record",
    "RunDiagnostics",
    "SGHMCDiagnostics",
    "SMCDiagnostics",
    "SWAGDiagnostics",
    "TrainingDiagnostics",
    "VIDiagnostics",
]


@dataclass(slots=True)
class Record:
    """A typed record whose None fields are figures not reported."""

    #: Fields holding records (or lists of them) of the named type, for :meth:`from_dict`.
    _nested: ClassVar[dict[str, type]] = {}

    def as_dict(self) -> dict[str, Any]:
        """The reported figures by name, nested records as mappings too."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            if isinstance(value, Record):
                value = value.as_dict()
            elif isinstance(value, list) and value and isinstance(value[0], Record):
                value = [v.as_dict() for v in value]
            out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, mapping: Mapping[str, Any]) -> Record:
        """The record of ``mapping`` (as :meth:`as_dict` gives it, or a part of it).

        Raises
        ------
        TypeError
            If ``mapping`` names a figure this record does not have.
        """
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no figures named {unknown}")
        values = dict(mapping)
        for name, kind in cls._nested.items():
            value = values.get(name)
            if isinstance(value, Mapping):
                values[name] = kind.from_dict(value)
            elif isinstance(value, list):
                values[name] = [kind.from_dict(v) if isinstance(v, Mapping) else v for v in value]
        return cls(**values)

    def update(self, other: Record) -> None:
        """Take every figure ``other`` (a record of this type or a base of it) reports."""
        if not isinstance(self, type(other)):
            raise TypeError(f"{type(self).__name__} cannot take a {type(other).__name__}")
        for f in fields(other):
            value = getattr(other, f.name)
            if value is not None:
                setattr(self, f.name, value)

    @classmethod
    def extending(cls, base: Record, **more: Any) -> Record:
        """A record of this type with ``base``'s figures (a base class's record), and
        ``more``, which may replace some of them."""
        if not issubclass(cls, type(base)):
            raise TypeError(f"{cls.__name__} does not extend {type(base).__name__}")
        return cls(**{**{f.name: getattr(base, f.name) for f in fields(base)}, **more})


@dataclass(slots=True)
class RunDiagnostics(Record):
    """What every method's run reports: its compile and wall times."""

    compile_time: float | None = None
    wall_time: float | None = None

    def shift_evidence(self, by: float) -> None:
        """Add ``by`` to each log-evidence figure (a change of the targets' units)."""


@dataclass(slots=True)
class TrainingDiagnostics(RunDiagnostics):
    """The shared training engine's figures, one entry per surviving member."""

    solver: str | None = None
    max_iter: int | None = None
    #: the plateau's epochs, ``n_iter_no_change="auto"`` resolved
    n_iter_no_change: int | None = None
    n_members: int | None = None
    n_dropped: int | None = None
    n_restarts: np.ndarray | None = None
    n_iter: np.ndarray | None = None
    converged: np.ndarray | None = None
    loss_curve: list | None = None
    final_loss: np.ndarray | None = None
    n_grad_evals: int | None = None
    train_time: float | None = None
    validation_loss_curve: list | None = None
    #: epochs between the entries of ``validation_loss_curve``: one a call of the epoch
    #: kernel, which takes several epochs of a few rows together
    validation_every: int | None = None


@dataclass(slots=True)
class EnsembleDiagnostics(TrainingDiagnostics):
    """The deep ensemble with ``noise_df="auto"``: the noise its held-out rows chose, and
    by how much (nats per held-out row, Student-t fit minus Gaussian fit, paired by
    member and row, with its standard error, over so many member-row pairs). The other
    figures are the kept fit's, but for ``n_grad_evals``, ``train_time`` and
    ``compile_time``, which add up both fits."""

    noise: str | None = None
    noise_df_gain: float | None = None
    noise_df_gain_se: float | None = None
    noise_df_rows: int | None = None


@dataclass(slots=True)
class RMSDiagnostics(TrainingDiagnostics):
    """Randomized MAP: whether the targets were perturbed too."""

    perturbed_targets: bool | None = None


@dataclass(slots=True)
class SWAGDiagnostics(TrainingDiagnostics):
    """SWAG: each member's snapshots, SWA learning rate and curvature."""

    n_snapshots: np.ndarray | None = None
    swa_learning_rate: np.ndarray | None = None
    swa_curvature: np.ndarray | None = None


@dataclass(slots=True)
class VIDiagnostics(TrainingDiagnostics):
    """Variational inference: the ELBO's Monte Carlo error and the estimators used."""

    elbo_se: float | None = None
    local_reparameterization: bool | None = None
    closed_form_kl: bool | None = None


@dataclass(slots=True)
class LBBNNDiagnostics(VIDiagnostics):
    """LBBNN: the expected share of weights included."""

    expected_density: float | None = None


@dataclass(slots=True)
class SGHMCDiagnostics(TrainingDiagnostics):
    """SGHMC: its chains, cycles and how much each cycle gained."""

    init: str | None = None
    n_chains: int | None = None
    n_cycles: int | None = None
    cycle_gains: np.ndarray | None = None
    loss_spread: float | None = None


@dataclass(slots=True)
class LaplaceDiagnostics(TrainingDiagnostics):
    """Laplace: the empirical-Bayes search, the Newton polish and the curvature."""

    hessian: str | None = None
    prior_groups: list | None = None
    prior_precision: np.ndarray | None = None
    noise_precision: np.ndarray | None = None
    init_log_evidence: np.ndarray | None = None
    evidence_trace: np.ndarray | None = None
    n_prior_updates: int | None = None
    log_symmetric_modes: float | None = None
    effective_parameters: float | None = None
    newton_steps: int | None = None
    newton_decrement: float | None = None
    newton_evidence_change: float | None = None
    newton_predictive_change: float | None = None
    gradient_norm: float | None = None
    laplace_time: float | None = None

    def shift_evidence(self, by: float) -> None:
        """Add ``by`` to the search's evidences (a change of the targets' units)."""
        if self.evidence_trace is not None:
            self.evidence_trace = self.evidence_trace + by
        if self.init_log_evidence is not None:
            self.init_log_evidence = self.init_log_evidence + by


@dataclass(slots=True)
class PredictiveModes(Record):
    """The predictive's figures per mode: the mean (class probabilities for a
    classifier) with its draws' variance and ESS, each of shape (modes, rows, outputs).
    For regression also the predictive density at points drawn from the predictive,
    shape (modes, rows, outputs, points): the mode's (``density``), with its draws'
    variance (``density_var``) and their ESS for it (``density_ess``, one a mode, row
    and output), and the equal-weight mixture's the points were drawn from
    (``proposal``, shape (rows, outputs, points))."""

    mean: np.ndarray | None = None
    mean_var: np.ndarray | None = None
    mean_ess: np.ndarray | None = None
    density: np.ndarray | None = None
    density_var: np.ndarray | None = None
    density_ess: np.ndarray | None = None
    proposal: np.ndarray | None = None


@dataclass(slots=True)
class ModeFigures(Record):
    """One mode's chains judged alone, and its place in the predictive."""

    chains: np.ndarray | None = None
    rhat_loglik: float | None = None
    rhat_outputs: np.ndarray | None = None
    ess_bulk_loglik: float | None = None
    ess_bulk_outputs: np.ndarray | None = None
    divergences: int | None = None
    mean_loglik: float | None = None
    elpd_loo: float | None = None
    khat_max: float | None = None
    weight: float | None = None


@dataclass(slots=True)
class ChainDiagnostics(RunDiagnostics):
    """The HMC family's figures: per chain, the convergence checks', each kernel's own,
    the modes', the driver's and, when the chains were extended, the extension's."""

    _nested: ClassVar[dict[str, type]] = {
        "modes": ModeFigures,
        "predictive_modes": PredictiveModes,
    }

    method: str | None = None
    n_chains: int | None = None
    n_warmup: int | None = None
    n_draws_per_chain: int | None = None
    accept_rate: np.ndarray | None = None
    divergences: int | None = None
    divergences_per_chain: np.ndarray | None = None
    warmup_divergences: int | None = None
    n_grad_evals: int | None = None
    n_grad_evals_per_chain: np.ndarray | None = None
    mean_n_leapfrog: np.ndarray | None = None
    chain_time: np.ndarray | None = None
    inverse_mass_matrix: np.ndarray | None = None
    step_size: np.ndarray | None = None
    loglik: np.ndarray | None = None
    ess_bulk_loglik: float | None = None
    ess_tail_loglik: float | None = None
    rhat_loglik: float | None = None
    rhat_outputs: np.ndarray | None = None
    ess_bulk_outputs: np.ndarray | None = None
    x_rms_max: float | None = None
    likelihood: str | None = None
    predictive_modes: PredictiveModes | None = None
    # each kernel's own
    e_bfmi: np.ndarray | None = None
    mean_tree_depth: np.ndarray | None = None
    max_tree_depth_hits: np.ndarray | None = None
    energy_var_per_dim: np.ndarray | None = None
    path_length: np.ndarray | None = None
    # several modes
    n_modes: int | None = None
    mode_of_chain: np.ndarray | None = None
    modes: list[ModeFigures] | None = None
    rhat_loglik_within_modes: float | None = None
    mode_weights: np.ndarray | None = None
    mode_weighting: str | None = None
    # the driver's
    init: str | None = None
    init_grad_evals: int | None = None
    init_time: float | None = None
    warmup_grad_evals: int | None = None
    tempering: dict | None = None
    # chains extended until converged
    stopped_because: str | None = None
    stop_rhat: float | None = None
    stop_ess: float | None = None
    n_draws_sampled_per_chain: int | None = None
    extension_round_times: np.ndarray | None = None
    extension_round_starts: np.ndarray | None = None
    budget_time: float | None = None


@dataclass(slots=True)
class SMCDiagnostics(RunDiagnostics):
    """Adaptive tempered SMC's figures; ``smc`` holds the per-stage columns."""

    method: str | None = None
    smc: dict | None = None
    n_stages: int | None = None
    n_particles: int | None = None
    ess: float | None = None
    n_unique: int | None = None
    accept_rate: float | None = None
    n_grad_evals: int | None = None
    stopped_because: str | None = None
