"""The knobs the HMC family's samplers share (NUTS, HMC, MALA, AdaptiveMetropolis, MCLMC,
MAMS), declared once: their constraints, defaults and documentation.

Each sampler still spells its ``__init__`` out, as scikit-learn's ``get_params`` needs, with
the shared defaults read from :data:`SAMPLER_DEFAULTS`; :func:`sampler_parameters` writes
the shared entries into its docstring, so every class shows every parameter.
"""

from __future__ import annotations

import inspect
import re
from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._base import NOISE_DF_CONSTRAINT, NOISE_DF_DOC, default_repr
from ._tempering import TEMPERING_CONSTRAINTS

#: The shared knobs' constraints (a sampler keeps those that name one of its knobs) ...
SAMPLER_CONSTRAINTS: dict = {
    "n_chains": [Interval(Integral, 1, None, closed="left")],
    "n_warmup": [Interval(Integral, 0, None, closed="left")],
    "target_accept": [Interval(Real, 0, 1, closed="neither")],
    "metric": [StrOptions({"diagonal", "dense", "diagonal_grad", "low_rank"})],
    "noise_update": [StrOptions({"marginal", "gibbs"})],
    "gibbs_output_layer": ["boolean"],
    "rescale_units": ["boolean"],
    # a small threshold would flag ordinary leaves as divergent, and cutting trajectories
    # at them depends on where the trajectory started, which breaks reversibility
    "max_delta_energy": [Interval(Real, 100, None, closed="left")],
    "thin": [Interval(Integral, 1, None, closed="left")],
    **TEMPERING_CONSTRAINTS,
    "init": [StrOptions({"prior", "map"}), "array-like"],
    "n_modes": [Interval(Integral, 1, None, closed="left")],
    "mode_weights": [StrOptions({"equal", "stacking"})],
    "heteroscedastic": ["boolean", StrOptions({"auto"})],
    "noise_df": NOISE_DF_CONSTRAINT,
    "target_rhat": [Interval(Real, 1, None, closed="neither"), None],
    "target_ess": [Interval(Real, 1, None, closed="left"), None],
    "max_time": [Interval(Real, 0, None, closed="neither"), None],
}

#: ... the defaults that are the same for every sampler (``n_warmup``, ``target_accept``,
#: ``metric`` and ``thin`` are each sampler's own) ...
SAMPLER_DEFAULTS: dict = {
    "n_chains": 4,
    "noise_update": "marginal",
    "gibbs_output_layer": False,
    "rescale_units": True,
    "max_delta_energy": 1000.0,
    "n_temperatures": 1,
    "max_temperature": 10.0,
    "init": "prior",
    "n_modes": 1,
    "mode_weights": "equal",
    "heteroscedastic": False,
    "noise_df": None,
    "target_rhat": None,
    "target_ess": None,
    "max_time": None,
}

#: ... and their documentation: ``(type, description)`` per numpydoc entry, the default
#: filled in from each class's signature. A class documents a shared knob itself where its
#: meaning differs there (``max_delta_energy`` of MALA and MCLMC).
SAMPLER_DOCS: dict = {
    "n_chains": (
        "int",
        """Independent chains, run in parallel threads over the estimator's ``n_jobs``. Four is
    the minimum for a trustworthy R-hat (Vehtari et al. 2021).""",
    ),
    "noise_update": (
        '{"marginal", "gibbs"}',
        """How an unknown Gaussian noise precision ``tau ~ Gamma(a, b)`` is sampled (ignored
    when ``noise_std`` is fixed and for classifiers). ``"marginal"``: the sampler explores
    the weights' marginal posterior, with ``tau`` integrated out analytically (a Student-t
    shaped likelihood in the residual sum of squares), and ``tau`` is drawn exactly from
    ``Gamma(a + n/2, b + SSR/2)`` after each transition. The joint draws are exact and
    the sampler never has to wait for alternating updates to move the weights and the
    noise together. ``"gibbs"``: the sampler explores the weights given the current
    ``tau``, then ``tau`` is drawn from the same conditional (Neal 1996): cheaper to reason
    about, but the two blocks are strongly coupled in a network that can fit its noise,
    so the chain mixes more slowly.""",
    ),
    "gibbs_output_layer": (
        "bool",
        """For regression, also draw the output layer's weights and biases from their exact
    Gaussian conditional (given the hidden layers and the noise) after every transition.
    The exact draw leaves the posterior unchanged and costs about one gradient. With NUTS
    it raised the bulk ESS per draw on diabetes (437 -> 620) and Boston (3086 -> 4149),
    but on Boston NUTS then needed longer trajectories (621 vs 350 steps per draw), so
    ESS per second fell by a fifth; off by default until that trade-off is understood.
    Ignored for classifiers.""",
    ),
    "rescale_units": (
        "bool",
        """After every transition, move each ReLU (or identity) hidden unit along its exact
    scale symmetry: incoming weights and bias times ``c``, outgoing weights divided by
    ``c``, with ``c`` drawn from its conditional (a generalized inverse Gaussian in
    ``c**2``, by a slice-sampling step; Liu & Sabatti 2000). The network's function does
    not change, so the move needs no pass over the data (the gradient just rescales);
    it carries the chain along the curved ridges that only the prior constrains and
    that the integrator crosses slowly. Skipped for tanh and logistic units, which have
    no such symmetry.""",
    ),
    "max_delta_energy": (
        "float",
        """Energy error that marks a divergent trajectory (Stan's threshold); at least 100,
    because a small one would cut ordinary trajectories and bias the draws.""",
    ),
    "n_temperatures": (
        "int",
        """Replicas per chain for parallel tempering (1: none). Replica ``k`` samples
    ``prior * likelihood**beta_k`` with its own step size and mass matrix, the betas
    running from 1 down to ``1 / max_temperature``; after every iteration neighbouring
    replicas propose to swap states (alternately the even and the odd pairs, Syed et al.
    2021), and only the ``beta = 1`` replica's draws are kept. At the end of every slow
    warm-up window but the last the inner betas are respaced so every pair swaps about
    equally often (a warm-up too short for two windows keeps the geometric ladder). The
    hot replicas carry the chain between modes that local moves leave rarely (sign and
    permutation symmetries of small networks, separated fits of small data sets), at
    ``n_temperatures`` times the cost. The number of replicas a ladder needs grows with
    the square root of the number of well-determined parameters, so it pays on small
    models and data; ``diagnostics_["tempering"]`` reports the swap rates and round trips.""",
    ),
    "max_temperature": (
        "float",
        "Temperature ``1 / beta`` of the hottest replica (at least 1).",
    ),
    "init": (
        '{"prior", "map"}, array-like of shape (n_chains, n_params) or (n_params,), or a sampler',
        """Where each chain starts: ``"prior"``, a draw from the prior (dispersed, as R-hat
    assumes); ``"map"``, its own MAP estimate from its own random initialization
    (scikit-learn's), by the training engine with a short budget (200 L-BFGS
    iterations up to 5,000 rows, else 20 Adam epochs at 0.01), which skips the
    warm-up's long approach from the prior's scale. Each chain's MAP is of a different
    initialization, so chains in different modes still show in R-hat. The gradient
    evaluations it took are ``diagnostics_["init_grad_evals"]``. An array gives the
    starts themselves in the flat layout of :mod:`skbnn.layout` (the network's weights,
    as a fitted posterior's ``thetas``), one row per chain, one per mode (replacing the
    trained optima of ``n_modes``) or one for all; chain ``c`` starts at row
    ``c % n_rows``. A sampler of this family (``MCLMC(...)``, ``NUTS(...)``, ...) runs
    first, on the same model and data with a seed of its own, and hands over where its
    chains ended: ``NUTS(n_modes=8, n_chains=8, init=MCLMC(n_modes=8, n_chains=8))``
    explores the eight modes as MILE does, then samples each by NUTS. It runs its
    warm-up and this fit's ``n_samples`` draws, of which it keeps none; its gradient
    evaluations and time are ``diagnostics_["init_grad_evals"]`` and
    ``diagnostics_["init_time"]``, and its knobs tune as ``method__init__<knob>``. It
    must give ``heteroscedastic`` and ``noise_update`` as this sampler does, one chain
    per chain, per mode or one for all, and with ``n_modes > 1`` the same modes.""",
    ),
    "n_modes": (
        "int",
        """Optima the chains sample around. A network's posterior has many separated modes
    (symmetries and distinct fits), and no chain crosses between them in a run's time,
    so chains started apart disagree however long they run. With ``n_modes > 1`` the
    run first trains ``n_modes`` MAP estimates, each from its own scikit-learn
    initialization (as ``init="map"``, unless ``init`` gives the starts), and starts chain ``c``
    at optimum ``c % n_modes``; ``n_chains`` must be at least ``n_modes`` (with
    :class:`MCLMC` this is MILE's route: an ensemble's members, then a chain from each).
    The predictive is the mixture over the modes, weighted by ``mode_weights``, and
    its Monte Carlo error is judged within each mode (from the ESS of its own
    chains), each mode's error counted by its weight: a ConvergenceWarning means
    that the draws estimate the predictive too coarsely, not that the modes differ.
    With ``n_modes=1`` each chain is judged as a mode of its own.
    ``diagnostics_["modes"]`` gives, per mode, its chains, weight, R-hat, ESS,
    divergences and leave-one-out fit. 1 keeps the dispersed starts of ``init``.""",
    ),
    "mode_weights": (
        '{"equal", "stacking"}',
        """How the modes are weighted in the predictive (with ``n_modes > 1``).
    ``"equal"``: every mode the same, as an ensemble (and MILE) does; the default,
    because on held-out data it predicted at least as well as stacking, whose weights
    from a few hundred draws per mode overfit their leave-one-out estimates.
    ``"stacking"``: the weights that maximize the leave-one-out log predictive
    density of the modes' mixture, each mode's density at a left-out row estimated by
    Pareto-smoothed importance sampling from its own draws (Yao, Vehtari & Gelman
    2022, stacking for non-mixing Bayesian computations): a mode that predicts worse
    than the others where they differ loses weight, and a chain stuck where it fits
    badly drops out.""",
    ),
    "heteroscedastic": (
        'bool or "auto"',
        """Whether the network also predicts the noise of every row (a variance head per
    target, as the members of :class:`DeepEnsemble`), sampled with the weights,
    instead of one noise for all rows; ``"auto"``: where the noise is inferred.
    Regression only. It lets the predictive widen where the data are noisier, which
    one noise precision cannot. On targets rounded to a grid of spacing ``h``
    (integers: counts, ratings; ``h = 1``) each row's variance is at least the
    rounding's, ``h ** 2 / 12`` (Sheppard's correction), where a draw's variance
    could otherwise collapse onto the points it predicts exactly, a density spike
    the likelihood rewards without bound.""",
    ),
    "noise_df": ("float or None", NOISE_DF_DOC),
    "target_rhat, target_ess, max_time": (
        "float or None",
        """Sample until converged: with any of them set, after the first ``n_samples`` draws
    the chains are extended in blocks, keeping their adapted step size and metric,
    until the split R-hat of the log-likelihood and of the monitored training-row
    outputs is at most ``target_rhat`` and their bulk ESS at least ``target_ess``
    (e.g. 1.01 and 400), or until ``max_time`` seconds of sampling (warm-up included;
    compilation and the MAP starts of ``init="map"`` not) are spent, or the chains
    hold as many draws as they may (20 times theirs without ``max_time``; 512 MB of
    draws with it). ``n_samples`` then caps the kept draws: each chain is thinned
    evenly to its share. No block starts after ``max_time``, and each takes at most
    about half the time left, so a run ends near it. ``max_time`` also bounds the
    first ``n_samples`` draws: when it runs out before they are complete, every chain
    stops at the end of the same block (a fortieth of the run), keeping fewer draws.
    Warm-up is never cut short (an unadapted chain samples badly), and a chain keeps at
    least 20 draws, so a budget shorter than warm-up is overrun by the rest of warm-up
    and those draws: a ``SlowFitWarning`` says so when the budget passes during
    warm-up, with the warm-up's time at its pace so far and a bound that fits it.
    ``diagnostics_["stopped_because"]`` is ``"targets_met"``, ``"max_time"``,
    ``"max_draws"``, or with ``max_time`` alone ``"n_samples"`` (the draws were
    complete in time); the progress bar shows the current R-hat and ESS. Not with
    ``n_temperatures > 1``.""",
    ),
}

_HEADER = re.compile(r"^    -{3,}$")
_ENTRY = re.compile(r"^    ([A-Za-z_][\w, ]*?) : ")


def _own_entries(lines: list[str], start: int) -> tuple[dict, int]:
    """The entries of the Parameters section whose first entry is at ``lines[start]``,
    by key (``"target_rhat, target_ess, max_time"``), and the index of the line after the
    section (the blank line before the next header, or the end)."""
    end = len(lines)
    for i in range(start, len(lines) - 1):
        if _HEADER.match(lines[i + 1]):
            end = i
            break
    while end > start and not lines[end - 1].strip():
        end -= 1
    entries: dict = {}
    key = None
    for line in lines[start:end]:
        match = _ENTRY.match(line)
        if match:
            key = match.group(1)
            entries[key] = []
        entries[key].append(line)
    return entries, end


def sampler_parameters(cls):
    """A class decorator that completes a sampler's Parameters section: the entries its
    docstring gives, and for every other ``__init__`` parameter the shared entry of
    :data:`SAMPLER_DOCS`, with the class's default, all in the signature's order.

    A parameter documented nowhere, or an entry that names no parameter, is a
    ``TypeError`` when the class is defined."""
    if cls.__doc__ is None:  # python -OO
        return cls
    signature = inspect.signature(cls.__init__).parameters
    defaults = {name: p.default for name, p in signature.items() if name != "self"}
    lines = cls.__doc__.split("\n")
    start = lines.index("    Parameters") + 2
    own, end = _own_entries(lines, start)
    # a class's own entry wins over the shared one
    keys = {name: key for key in [*SAMPLER_DOCS, *own] for name in key.split(", ")}
    stray = {key for key in own if not set(key.split(", ")) <= set(defaults)}
    missing = set(defaults) - set(keys)
    if stray or missing:
        raise TypeError(
            f"{cls.__name__}'s docstring: entries naming no parameter {sorted(stray)}, "
            f"parameters with no entry {sorted(missing)}"
        )
    section, done = [], set()
    for name in defaults:
        key = keys[name]
        if key in done:
            continue
        done.add(key)
        if key in own:
            section += own[key]
            continue
        kind, text = SAMPLER_DOCS[key]
        values = [default_repr(defaults[n]) for n in key.split(", ")]
        default = values[0] if len(set(values)) == 1 else ", ".join(values)
        section.append(f"    {key} : {kind}, default={default}")
        section += ["        " + line for line in text.replace("\n    ", "\n").split("\n")]
    cls.__doc__ = "\n".join(lines[:start] + section + lines[end:])
    return cls
