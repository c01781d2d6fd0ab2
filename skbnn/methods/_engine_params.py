"""The training engine's parameters: scikit-learn MLP's names, their constraints, each
family's defaults and their documentation, which :func:`engine_parameters` writes into
each method's docstring."""

from __future__ import annotations

import inspect
from numbers import Integral, Real

from sklearn.utils._param_validation import Interval, StrOptions

from ._base import default_repr

#: The training engine's parameters, with scikit-learn MLP's names: their constraints ...
ENGINE_CONSTRAINTS: dict = {
    "solver": [StrOptions({"auto", "lbfgs", "adam", "sgd"})],
    "learning_rate_init": [Interval(Real, 0, None, closed="neither")],
    "learning_rate": [StrOptions({"constant", "cosine", "step", "adaptive"})],
    "momentum": [Interval(Real, 0, 1, closed="left")],
    "nesterovs_momentum": ["boolean"],
    "beta_1": [Interval(Real, 0, 1, closed="left")],
    "beta_2": [Interval(Real, 0, 1, closed="left")],
    "epsilon": [Interval(Real, 0, None, closed="neither")],
    "batch_size": [StrOptions({"auto"}), Interval(Integral, 1, None, closed="left")],
    "max_iter": [Interval(Integral, 1, None, closed="left"), None],
    "tol": [Interval(Real, 0, None, closed="left")],
    "early_stopping": ["boolean", StrOptions({"auto"})],
    "validation_fraction": [Interval(Real, 0, 1, closed="neither")],
    "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), StrOptions({"auto"})],
}

#: ... their defaults, per family of methods: the ensembles' and SWAG's (``"members"``),
#: Laplace's (one MAP on all rows, by Adam) and the variational methods' (a stochastic
#: objective, optimized at a small constant rate) ...
_MEMBER_DEFAULTS = {
    "solver": "auto",
    "learning_rate_init": 0.01,
    "learning_rate": "adaptive",
    "momentum": 0.9,
    "nesterovs_momentum": True,
    "beta_1": 0.9,
    "beta_2": 0.999,
    "epsilon": 1e-8,
    "batch_size": "auto",
    "max_iter": None,
    "tol": 1e-4,
    "early_stopping": "auto",
    "validation_fraction": 0.1,
    "n_iter_no_change": "auto",
}
ENGINE_DEFAULTS: dict = {
    "members": _MEMBER_DEFAULTS,
    # Laplace polishes its MAP by Newton's method afterwards, so a longer plateau would
    # only cost time
    "laplace": {
        **_MEMBER_DEFAULTS,
        "solver": "adam",
        "early_stopping": False,
        "n_iter_no_change": 20,
    },  # fmt: skip
    "variational": {
        **_MEMBER_DEFAULTS,
        "learning_rate_init": 1e-3,
        "learning_rate": "constant",
        "early_stopping": False,
        "n_iter_no_change": 10,
    },
}

#: ... and their documentation: ``(type, description)`` per numpydoc entry, the default
#: filled in from each class's signature (:func:`engine_parameters`).
ENGINE_DOCS: dict = {
    "solver": (
        '{"auto", "adam", "sgd", "lbfgs"}',
        """The optimizer. ``"auto"`` is Adam where members stop early (early stopping needs a
    minibatch solver) or have more than 5,000 rows, and full-batch L-BFGS otherwise
    (no learning rate; it trains to the optimum, and ignores early stopping, as in
    scikit-learn).""",
    ),
    "learning_rate_init": (
        "float",
        """Step size of Adam and SGD (on the per-row loss, as scikit-learn's MLP). With the
    adaptive schedule a large start costs nothing: a plateau lowers it.""",
    ),
    "learning_rate": (
        '{"adaptive", "constant", "cosine", "step"}',
        """Schedule over the epochs. ``"adaptive"`` (scikit-learn's name): when the monitored
    loss has not improved by ``tol`` for ``n_iter_no_change`` epochs, the rate is
    divided by 5 and training goes on from the best parameters so far; at the plateau
    after the third division the member stops. A fast start and a precise end, which
    near-noiseless data need. ``"constant"``; ``"cosine"``, decay to zero over
    ``max_iter``; ``"step"``, x0.1 at half and at three quarters of ``max_iter``.""",
    ),
    "momentum": ("float", "SGD's momentum."),
    "nesterovs_momentum": ("bool", ""),
    "beta_1, beta_2, epsilon": (
        "float",
        "Adam's moment decay rates and its denominator's floor.",
    ),
    "batch_size": (
        'int or "auto"',
        """Rows per minibatch; ``"auto"`` is 32, raised on more than 32,000 rows so that an
    epoch takes at most 1,000 steps.""",
    ),
    "max_iter": (
        "int",
        """Epochs of Adam and SGD, iterations of L-BFGS. ``None`` is a cap rather than a
    length: epochs for 300,000 steps and at least 200 (the stopping rule ends most
    runs far sooner), but no more than 2 x 10^7 row visits (20 epochs of 10^6 rows) and
    at least 10; or 1000 L-BFGS iterations. L-BFGS also stops after 15,000 loss
    evaluations, or ``2 * max_iter`` when that is more.""",
    ),
    "tol": (
        "float",
        """An epoch counts as an improvement when it lowers the monitored loss (nats per row)
    by more than ``tol``. For L-BFGS it is the gradient tolerance, as in scikit-learn.""",
    ),
    "early_stopping": (
        'bool or "auto"',
        """Hold out ``validation_fraction`` of each member's rows, monitor their
    log-likelihood instead of the training loss, and keep the best parameters.
    ``"auto"`` is True where the noise is learned with the weights (regression with
    ``noise_std=None``): a network of tens of units fitted to its optimum on a few
    hundred rows overfits, and its noise estimate shrinks with the training residuals,
    so its intervals under-cover. It is False for classifiers and a fixed
    ``noise_std``, whose members are trained to the optimum: there the prior regularizes
    alone, and a held-out share only costs rows. Each member holds out its own rows,
    which also decorrelates the members. A member with too few rows to hold one out
    trains on all of them.""",
    ),
    "validation_fraction": ("float", ""),
    "n_iter_no_change": (
        'int or "auto"',
        """Epochs without improvement that make a plateau. ``"auto"``: the epochs of 2,000
    optimizer steps, and at least 20; it differs from 20 below about 3,000 rows (at the
    default batch size), where 20 epochs are a few hundred steps and ended members whose
    held-out loss was still falling.""",
    ),
}


def engine_parameters(**own):
    """A class decorator that writes the training engine's parameters into the class
    docstring, in place of its line ``<engine parameters>``: one numpydoc entry per
    :data:`ENGINE_DOCS` item, with the class's own defaults (read from its ``__init__``)
    and ``own[name]``, a ``(type, description)`` pair, where the class gives its own."""

    def decorate(cls):
        if cls.__doc__ is None:  # python -OO
            return cls
        defaults = {
            name: p.default
            for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self"
        }
        entries = []
        for key, (kind, text) in ENGINE_DOCS.items():
            names = key.split(", ")
            default = ", ".join(default_repr(defaults[name]) for name in names)
            kind, text = own.get(key, (kind, text))
            entries.append(f"    {key} : {kind}, default={default}\n")
            if text:
                entries.append("        " + text.replace("\n    ", "\n        ") + "\n")
        cls.__doc__ = cls.__doc__.replace("    <engine parameters>\n", "".join(entries))
        return cls

    return decorate
