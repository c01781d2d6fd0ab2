"""The whole posterior predictive of a fitted estimator as an ONNX model (the ``onnx`` extra).

:func:`to_onnx` converts a fitted :class:`~skbnn.BayesianMLPRegressor`, a
:class:`~skbnn.BayesianMLPClassifier`, or a scikit-learn :class:`~sklearn.pipeline.Pipeline`
ending in one, through skl2onnx: the earlier steps by skl2onnx's own converters, the
estimator by the converter registered here, which builds its graph from the fitted
:class:`~skbnn.Predictive` alone. A regressor's graph has the outputs ``mean`` and ``std``
(``predict(X, return_std=True)``: the network's spread over the posterior plus the noise),
a classifier's ``label`` and ``probabilities`` (``predict`` and ``predict_proba``).

Posteriors of draws (MCMC, SMC, ensembles, SWAG, VI, LBBNN, SGHMC, a Laplace fit with
``predictive="mc"``) run all their stored draws as one batched graph: each layer's weights
stacked over the draws, ``(S, fan_in, fan_out)``, broadcast matrix products over groups of
draws whose activations stay in cache, then the weighted moments over the draws. A
Laplace fit's linearized predictive (the default, ``predictive="glm"``) runs the network at
the MAP, its Jacobian by backpropagation in the graph, and the function variance ``J Sigma
J^T`` from the stored covariance root; a classifier's probit link or its average over the
linearized logits' draws follow.

onnx and skl2onnx are imported when a model is converted, never with :mod:`skbnn`.
"""

from __future__ import annotations

import math

import numpy as np

from ._draws import noise_variance_factor
from .layout import ACTIVATIONS

__all__ = ["to_onnx"]

#: The skl2onnx operator names of the estimators' converters.
_ALIASES = {"regressor": "SkbnnBayesianMLPRegressor", "classifier": "SkbnnBayesianMLPClassifier"}

#: Units of the widest layer in one group of draws of the batched graph: a group's
#: activations for 1,000 rows (4 MB) stay in a core's cache, where those of 1,000 draws
#: of a 10-unit layer (80 MB) would go through memory at every operation.
_GROUP_COLUMNS = 512

#: The oldest opset the graphs are written for: ReduceSum and Unsqueeze take their axes as
#: inputs from 13 on.
_MIN_OPSET = 13


def to_onnx(model, X_sample, *, dtype=np.float64, target_opset: int | None = None):
    """The ONNX model of a fitted estimator's posterior predictive, or of a Pipeline that
    ends in one.

    The graph takes one input ``X`` of shape ``(n_samples, n_features)`` (of the first
    step) and computes, from the stored posterior:

    * for a :class:`~skbnn.BayesianMLPRegressor`, ``mean`` and ``std``, both of shape
      ``(n_samples, n_outputs)`` (one column for a single target): ``predict(X,
      return_std=True)``, the standard deviation of the posterior predictive of ``y``
      (the network's spread over the posterior and the observation noise);
    * for a :class:`~skbnn.BayesianMLPClassifier`, ``label`` ``(n_samples,)`` (the
      classes' own type: int64, string or double) and ``probabilities`` ``(n_samples,
      n_classes)``: ``predict`` and ``predict_proba``.

    Every method's posterior is exported exactly, as its ``predict`` computes it: the
    stored draws run as one batched graph, and a Laplace fit's linearized predictive
    runs the network's Jacobian at the MAP (see the module docstring). In float64 the
    outputs agree with the estimator's to rounding (about 1e-15 relative); the
    graph holds every stored draw's weights, so its size is ``8 S n_weights`` bytes for
    ``S`` draws (a Laplace fit's full or Kronecker-factored covariance adds ``8 q^2``
    for its ``q`` covered parameters). Running it holds every draw's outputs for the rows
    at once, ``S`` by ``n_samples`` by ``n_outputs`` numbers (a linearized Laplace: the
    Jacobian, ``n_outputs`` by ``n_samples`` by ``q``).

    Parameters
    ----------
    model : BayesianMLPRegressor, BayesianMLPClassifier or Pipeline
        Fitted; a Pipeline's earlier steps are converted by skl2onnx's own converters
        (any scikit-learn transformer it supports, such as ``StandardScaler``).
    X_sample : array-like of shape (n_samples, n_features)
        Inputs of the model's kind: their width is the graph input's.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        The graph's float type. skbnn computes in float64; in float32 the weights and
        every operation are single precision, and the outputs agree with the
        estimator's to about 1e-4 relative or better (worse where a small spread is the
        difference of large outputs, or for probabilities below float32's range).
    target_opset : int, default=None
        The ONNX opset (skl2onnx's latest tested one when None); at least 13.

    Returns
    -------
    onnx.ModelProto
        Run it with ``onnxruntime.InferenceSession(model.SerializeToString())``.

    Raises
    ------
    TypeError
        If ``model`` is not one of the estimators or a Pipeline ending in one.
    sklearn.exceptions.NotFittedError
        If the estimator is not fitted.
    NotImplementedError
        For a posterior or an activation that has no exact graph here.

    Examples
    --------
    >>> import numpy as np
    >>> import onnxruntime as ort
    >>> from sklearn.datasets import make_regression
    >>> from skbnn import BayesianMLPRegressor
    >>> from skbnn.onnx import to_onnx
    >>> X, y = make_regression(n_samples=60, n_features=2, noise=1.0, random_state=0)
    >>> reg = BayesianMLPRegressor(method="laplace", random_state=0).fit(X, y)
    >>> session = ort.InferenceSession(to_onnx(reg, X).SerializeToString())
    >>> mean, std = session.run(["mean", "std"], {"X": X[:3]})
    >>> np.allclose(std[:, 0], reg.predict(X[:3], return_std=True)[1])
    True
    """
    from sklearn.pipeline import Pipeline
    from sklearn.utils.validation import check_is_fitted

    from .estimators import BayesianMLPClassifier, BayesianMLPRegressor

    final = model.steps[-1][1] if isinstance(model, Pipeline) else model
    if not isinstance(final, (BayesianMLPRegressor, BayesianMLPClassifier)):
        raise TypeError(
            "to_onnx converts a fitted BayesianMLPRegressor, BayesianMLPClassifier, or a "
            f"Pipeline whose last step is one; got {type(final).__name__}"
        )
    check_is_fitted(final)
    dtype = np.dtype(dtype)
    if dtype not in (np.float64, np.float32):
        raise ValueError(f"dtype must be numpy.float64 or numpy.float32, got {dtype}")
    if target_opset is not None and target_opset < _MIN_OPSET:
        raise ValueError(f"target_opset must be at least {_MIN_OPSET}, got {target_opset}")
    shape = np.shape(X_sample)
    if len(shape) != 2:
        raise ValueError(f"X_sample must be 2-D (n_samples, n_features), got shape {shape}")
    n_features = getattr(model, "n_features_in_", shape[1])
    if shape[1] != n_features:
        raise ValueError(
            f"X_sample has {shape[1]} features, but the model was fitted on {n_features}"
        )
    _check_exportable(final.predictive_)

    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType

    if isinstance(model, Pipeline) and type(model) is not Pipeline:
        # skl2onnx knows scikit-learn's own Pipeline only (skbnn.pipeline's adds methods)
        model = Pipeline(model.steps)
    _register(type(final), isinstance(final, BayesianMLPClassifier))
    tensor = DoubleTensorType if dtype == np.float64 else FloatTensorType
    onx = convert_sklearn(
        model, initial_types=[("X", tensor([None, int(n_features)]))], target_opset=target_opset
    )
    expected = ["label", "probabilities"] if final.predictive_.is_classifier else ["mean", "std"]
    names = [o.name for o in onx.graph.output]
    if names != expected:  # pragma: no cover - a name taken by an earlier step
        raise RuntimeError(f"the graph's outputs are {names}, expected {expected}")
    return onx


def _check_exportable(predictive) -> None:
    """NotImplementedError for a predictive that no graph here computes exactly (raised
    here, before skl2onnx would wrap it in its own error)."""
    from ._draws import WeightedDraws
    from .posterior import LaplacePosterior

    if predictive.activation not in ACTIVATIONS.values():
        raise NotImplementedError(f"no ONNX graph for activation code {predictive.activation}")
    if predictive.is_classifier:
        _label_kind(predictive.classes)
    posterior = predictive.posterior
    if isinstance(posterior, LaplacePosterior):
        # the linearized predictive's graph, or its stored draws' (predictive="mc")
        return
    # the draws' graph is exact for a posterior that predicts as WeightedDraws does
    base = ("components", "class_probabilities", "predictive")
    if not isinstance(posterior, WeightedDraws) or any(
        getattr(type(posterior), name) is not getattr(WeightedDraws, name) for name in base
    ):
        raise NotImplementedError(
            f"to_onnx cannot export a {type(posterior).__name__}: it predicts otherwise "
            "than by pushing its stored draws through the network, and no graph here "
            "computes its predictive"
        )


def _register(cls, classifier: bool) -> None:
    """Register the converter of ``cls`` with skl2onnx (idempotent): a parser naming the
    outputs, their shapes, and the graph."""
    from skl2onnx import update_registered_converter

    alias = _ALIASES["classifier" if classifier else "regressor"]
    update_registered_converter(cls, alias, _shapes, _convert, parser=_parse)


def _parse(scope, model, inputs, custom_parsers=None):
    from skl2onnx.common.data_types import Int64TensorType, guess_tensor_type

    classifier = model.predictive_.is_classifier
    operator = scope.declare_local_operator(
        _ALIASES["classifier" if classifier else "regressor"], model
    )
    operator.inputs = inputs
    if classifier:
        outputs = [
            ("label", Int64TensorType()),
            ("probabilities", guess_tensor_type(inputs[0].type)),
        ]
    else:
        outputs = [
            ("mean", guess_tensor_type(inputs[0].type)),
            ("std", guess_tensor_type(inputs[0].type)),
        ]
    for name, kind in outputs:
        operator.outputs.append(scope.declare_local_variable(name, kind))
    return operator.outputs


def _shapes(operator) -> None:
    from skl2onnx.common.data_types import (
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    predictive = operator.raw_operator.predictive_
    n = operator.inputs[0].get_first_dimension()
    real = DoubleTensorType if _real_dtype(operator) == np.float64 else FloatTensorType
    if not predictive.is_classifier:
        operator.outputs[0].type = real([n, predictive.n_outputs])
        operator.outputs[1].type = real([n, predictive.n_outputs])
        return
    kind = _label_kind(predictive.classes)
    label = {"int": Int64TensorType, "str": StringTensorType, "float": real}[kind]
    operator.outputs[0].type = label([n])
    operator.outputs[1].type = real([n, predictive.n_outputs])


def _real_dtype(operator) -> np.dtype:
    from skl2onnx.common.data_types import FloatTensorType

    single = isinstance(operator.inputs[0].type, FloatTensorType)
    return np.dtype(np.float32 if single else np.float64)


def _label_kind(classes) -> str:
    kind = np.asarray(classes).dtype.kind
    if kind in "biu":
        return "int"
    if kind == "f":
        return "float"
    if kind == "U" or (kind == "O" and all(isinstance(c, str) for c in classes)):
        return "str"
    raise NotImplementedError(
        f"to_onnx exports integer, float or string class labels, not {np.asarray(classes).dtype}"
    )


class _Graph:
    """Adds nodes and constants to skl2onnx's container, named uniquely in its scope, in
    the graph's float type."""

    def __init__(self, scope, container, dtype):
        self.scope, self.container, self.dtype = scope, container, np.dtype(dtype)

    def const(self, value, name: str = "c") -> str:
        from onnx import TensorProto, numpy_helper

        value = np.asarray(value)
        unique = self.scope.get_unique_variable_name(name)
        if value.dtype.kind in "UO":
            data = [str(v).encode("utf-8") for v in value.ravel()]
            self.container.add_initializer(unique, TensorProto.STRING, list(value.shape), data)
            return unique
        if value.dtype.kind == "f":
            value = value.astype(self.dtype)
        elif value.dtype.kind in "biu":
            value = value.astype(np.int64)
        tensor = numpy_helper.from_array(np.ascontiguousarray(value), unique)
        self.container.add_initializer(unique, None, None, tensor)
        return unique

    def op(self, op_type: str, *inputs: str, out: str | None = None, **attrs) -> str:
        out = out or self.scope.get_unique_variable_name(op_type.lower())
        name = self.scope.get_unique_operator_name(f"Skbnn{op_type}")
        self.container.add_node(op_type, list(inputs), [out], name=name, **attrs)
        return out

    def axes(self, *axes: int) -> str:
        return self.const(np.array(axes, dtype=np.int64), "axes")

    def reduce_sum(self, x: str, axis: int, keepdims: int = 0) -> str:
        return self.op("ReduceSum", x, self.axes(axis), keepdims=keepdims)

    def unsqueeze(self, x: str, axis: int) -> str:
        return self.op("Unsqueeze", x, self.axes(axis))

    def square(self, x: str) -> str:
        return self.op("Mul", x, x)

    def activation(self, z: str, code: int) -> str:
        if code == ACTIVATIONS["identity"]:
            return z
        names = {ACTIVATIONS["relu"]: "Relu", ACTIVATIONS["tanh"]: "Tanh"}
        return self.op(names.get(code, "Sigmoid"), z)

    def derivative(self, z: str, a: str, code: int) -> str | None:
        """The activation's derivative at pre-activations ``z`` (outputs ``a``); None
        for the identity's 1."""
        if code == ACTIVATIONS["identity"]:
            return None
        if code == ACTIVATIONS["relu"]:
            positive = self.op("Greater", z, self.const(0.0))
            return self.op("Cast", positive, to=_onnx_type(self.dtype))
        one = self.const(1.0)
        if code == ACTIVATIONS["tanh"]:
            return self.op("Sub", one, self.square(a))
        return self.op("Mul", a, self.op("Sub", one, a))

    def sigmoid(self, x: str) -> str:
        # 1 / (1 + exp(-x)): relative precision in both tails, as scipy's expit
        one = self.const(1.0)
        return self.op("Reciprocal", self.op("Add", one, self.op("Exp", self.op("Neg", x))))

    def softplus(self, x: str) -> str:
        # max(x, 0) + log(1 + exp(-|x|)), numpy's logaddexp(0, x) without overflow
        tail = self.op("Exp", self.op("Neg", self.op("Abs", x)))
        log = self.op("Log", self.op("Add", self.const(1.0), tail))
        return self.op("Add", self.op("Relu", x), log)

    def class_probabilities(self, logits: str, binary: bool) -> str:
        """Class probabilities ``(..., n_classes)`` from network outputs ``(..., k)``, as
        :func:`skbnn.posterior.class_probabilities`."""
        if binary:
            p0 = self.sigmoid(self.op("Neg", logits))
            return self.op("Concat", p0, self.sigmoid(logits), axis=-1)
        return self.op("Softmax", logits, axis=-1)


def _onnx_type(dtype) -> int:
    from onnx import TensorProto

    return TensorProto.DOUBLE if np.dtype(dtype) == np.float64 else TensorProto.FLOAT


def _convert(scope, operator, container) -> None:
    from .posterior import LaplacePosterior

    predictive = operator.raw_operator.predictive_
    g = _Graph(scope, container, _real_dtype(operator))
    X = operator.inputs[0].full_name
    outputs = [o.full_name for o in operator.outputs]
    posterior = predictive.posterior
    if isinstance(posterior, LaplacePosterior) and posterior.predictive_kind == "glm":
        _linearized(g, predictive, X, outputs)
    else:
        _draws(g, predictive, X, outputs)


def _forward(g: _Graph, X: str, coefs, intercepts, activation: int):
    """The network at one parameter vector on ``X``: its output and, per layer, its input
    and pre-activation."""
    h, inputs, pre = X, [], []
    last = len(coefs) - 1
    for layer, (W, b) in enumerate(zip(coefs, intercepts, strict=True)):
        inputs.append(h)
        z = g.op("Add", g.op("MatMul", h, g.const(W, "coef")), g.const(b, "intercept"))
        pre.append(z)
        h = z if layer == last else g.activation(z, activation)
    return h, inputs, pre


def _forward_draws(g: _Graph, X: str, coefs, intercepts, activation: int) -> str:
    """The network at every stored draw on ``X``: outputs ``(S, n, k)``.

    The draws go in groups of at most :data:`_GROUP_COLUMNS` units of the widest layer:
    a group's first layer is one matrix product of ``X`` with its draws' weights side by
    side, ``(n, fan_in) @ (fan_in, G fan_out)``, the later layers broadcast products
    ``(G, n, fan_in) @ (G, fan_in, fan_out)``; the groups' outputs are concatenated."""
    S = len(coefs[0])
    widest = max(W.shape[2] for W in coefs)
    size = max(1, _GROUP_COLUMNS // widest)
    last = len(coefs) - 1
    outputs = []
    for lo in range(0, S, size):
        draws = slice(lo, min(S, lo + size))
        W, b = coefs[0][draws], intercepts[0][draws]
        n_draws, fan_in, fan_out = W.shape
        side_by_side = W.transpose(1, 0, 2).reshape(fan_in, n_draws * fan_out)
        h = g.op("Gemm", X, g.const(side_by_side, "coef"), g.const(b.ravel(), "intercept"))
        if last > 0:
            h = g.activation(h, activation)
        shape = g.const(np.array([-1, n_draws, fan_out], dtype=np.int64), "shape")
        h = g.op("Transpose", g.op("Reshape", h, shape), perm=[1, 0, 2])
        for layer in range(1, last + 1):
            W, b = coefs[layer][draws], intercepts[layer][draws][:, None, :]
            h = g.op("Add", g.op("MatMul", h, g.const(W, "coef")), g.const(b, "intercept"))
            if layer < last:
                h = g.activation(h, activation)
        outputs.append(h)
    return outputs[0] if len(outputs) == 1 else g.op("Concat", *outputs, axis=0)


def _draws(g: _Graph, predictive, X: str, outputs) -> None:
    """Every stored draw through the network at once, then the predictive's moments or
    averaged class probabilities over the draws."""
    draws = predictive.stacked_draws()
    f = _forward_draws(g, X, draws.coefs, draws.intercepts, predictive.activation)
    w = g.const(draws.weights[:, None, None], "weights")
    if predictive.is_classifier:
        p = g.class_probabilities(f, len(predictive.classes) == 2)
        _classes(g, predictive, g.reduce_sum(g.op("Mul", w, p), 0), outputs)
        return
    k = predictive.n_outputs
    if draws.noise_var is None:
        # heteroscedastic: the outputs are the means, then the raw noise variances
        mean = g.op("Slice", f, g.axes(0), g.axes(k), g.axes(2))
        raw = g.op("Slice", f, g.axes(k), g.axes(2 * k), g.axes(2))
        noise = g.op("Add", g.softplus(raw), g.const(predictive.posterior.min_var))
        if predictive.noise_df is not None:
            # a Student-t's variance is its squared scale times df / (df - 2)
            factor = noise_variance_factor(predictive.noise_df)
            noise = g.op("Mul", noise, g.const(factor, "t_variance"))
        aleatoric = g.reduce_sum(g.op("Mul", w, noise), 0)
    else:
        mean = f
        aleatoric = g.const(draws.weights @ draws.noise_var, "aleatoric")
    m = g.reduce_sum(g.op("Mul", w, mean), 0)
    # two passes, as Predictive's moments: E[f^2] - m^2 cancels where the spread is small
    spread = g.reduce_sum(g.op("Mul", w, g.square(g.op("Sub", mean, m))), 0)
    _moments(g, predictive, m, g.op("Add", spread, aleatoric), outputs)


def _moments(g: _Graph, predictive, mean: str, var: str, outputs) -> None:
    """``mean`` and ``std`` in the units of ``y`` from the standardized mean and total
    variance, ``(n, n_outputs)``."""
    y_std = g.const(predictive.y_std, "y_std")
    g.op("Add", g.op("Mul", mean, y_std), g.const(predictive.y_mean, "y_mean"), out=outputs[0])
    g.op("Mul", g.op("Sqrt", var), y_std, out=outputs[1])


def _classes(g: _Graph, predictive, proba: str, outputs) -> None:
    """``label`` and ``probabilities`` from the averaged class probabilities."""
    # a weighted sum of probabilities that are all 1 can round to 1 + 2e-16
    g.op("Clip", proba, g.const(0.0), g.const(1.0), out=outputs[1])
    index = g.op("ArgMax", outputs[1], axis=1, keepdims=0)
    classes = np.asarray(predictive.classes)
    if _label_kind(classes) == "str":
        classes = classes.astype(str)
    g.op("Gather", g.const(classes, "classes"), index, axis=0, out=outputs[0])


def _linearized(g: _Graph, predictive, X: str, outputs) -> None:
    """A Laplace fit's linearized (GLM) predictive: the network at the MAP, its Jacobian
    in the covered parameters by backpropagation, the function variance ``diag(J Sigma
    J^T)`` from the covariance root, then the noise (regression) or the link
    (classification)."""
    posterior = predictive.posterior
    layout = predictive.layout
    coefs, intercepts = layout.unpack(posterior.theta)
    f, inputs, pre = _forward(g, X, coefs, intercepts, predictive.activation)
    k = int(layout.sizes[-1])
    blocks = _jacobian_blocks(g, predictive, posterior.first_layer, coefs, inputs, pre)
    root = posterior.covariance_root()
    fvar = g.op("Transpose", _function_variance(g, blocks, root), perm=[1, 0])  # (n, k)
    if not predictive.is_classifier:
        tau = np.broadcast_to(posterior.noise_precision, (k,))
        noise = g.const((1.0 / np.sqrt(tau)) ** 2, "noise_var")
        _moments(g, predictive, f, g.op("Add", fvar, noise), outputs)
        return
    binary = len(predictive.classes) == 2
    if posterior.link_approx == "probit":
        # the probit approximation of the averaged link: the logits scaled by
        # 1 / sqrt(1 + pi / 8 var)
        scaled = g.op("Mul", g.const(math.pi / 8.0), fvar)
        kappa = g.op("Reciprocal", g.op("Sqrt", g.op("Add", g.const(1.0), scaled)))
        proba = g.class_probabilities(g.op("Mul", kappa, f), binary)
    else:
        # the average over the linearized logits' stored draws f + J delta_s
        dev = posterior.link_deviations()
        shifts = [g.op("MatMul", J, g.const(dev[:, c].T, "deviations")) for J, c in blocks]
        shifts = _sum(g, shifts)
        f_t = g.unsqueeze(g.op("Transpose", f, perm=[1, 0]), -1)
        logits = g.op("Transpose", g.op("Add", f_t, shifts), perm=[2, 1, 0])  # (S, n, k)
        p = g.class_probabilities(logits, binary)
        w = g.const(np.full((len(dev), 1, 1), 1.0 / len(dev)), "weights")
        proba = g.reduce_sum(g.op("Mul", w, p), 0)
    _classes(g, predictive, proba, outputs)


def _jacobian_blocks(g: _Graph, predictive, first_layer: int, coefs, inputs, pre) -> list:
    """The Jacobian of the outputs in the covered parameters, by blocks: ``[(J, columns)]``
    with ``J`` of shape ``(k, n, block)`` (broadcastable: a bias block of the last layer
    is ``(k, 1, k)``) and ``columns`` its slice among the covered parameters.

    Backpropagation from the outputs' identity (:func:`skbnn._kron.output_derivatives`):
    ``delta`` is the outputs' derivative in a layer's pre-activations, a weight's
    Jacobian the outer product of the layer's input and ``delta``, a bias's ``delta``."""
    layout = predictive.layout
    k = int(layout.sizes[-1])
    start = int(layout.offsets[first_layer])
    delta = g.const(np.eye(k)[:, None, :], "eye")  # (k, 1, k)
    blocks = []
    for layer in range(layout.n_layers - 1, first_layer - 1, -1):
        w, b = layout.slices(layer)
        fan_in, fan_out = coefs[layer].shape
        outer = g.op("Mul", g.unsqueeze(inputs[layer], -1), g.unsqueeze(delta, -2))
        shape = g.const(np.array([k, -1, fan_in * fan_out], dtype=np.int64), "shape")
        blocks.append((g.op("Reshape", outer, shape), slice(w.start - start, w.stop - start)))
        blocks.append((delta, slice(b.start - start, b.stop - start)))
        if layer > first_layer:
            delta = g.op("MatMul", delta, g.const(coefs[layer].T, "coef_t"))
            deriv = g.derivative(pre[layer - 1], inputs[layer], predictive.activation)
            if deriv is not None:
                delta = g.op("Mul", delta, deriv)
    return blocks


def _function_variance(g: _Graph, blocks, root: np.ndarray) -> str:
    """``diag(J Sigma J^T)``, ``(k, n)``, from the Jacobian's blocks and a root ``F`` of
    ``Sigma`` (``F^T F``; a 1-D root is a diagonal's)."""
    if root.ndim == 1:
        return _sum(
            g, [g.op("MatMul", g.square(J), g.const(root[c] ** 2, "var")) for J, c in blocks]
        )
    rows = [np.flatnonzero(np.any(root[:, c] != 0, axis=1)) for _, c in blocks]
    if sum(len(r) for r in rows) != root.shape[0]:
        # F J, every block's part of each row of F summed, then its squares
        parts = [g.op("MatMul", J, g.const(root[:, c].T, "root")) for J, c in blocks]
        return g.reduce_sum(g.square(_sum(g, parts)), -1)
    # each row of F covers one block (a Kronecker-factored root): a sum of squares per
    # block, with only that block's rows in the graph
    terms = []
    for (J, c), r in zip(blocks, rows, strict=True):
        if len(r):
            G = g.op("MatMul", J, g.const(root[r][:, c].T, "root"))
            terms.append(g.reduce_sum(g.square(G), -1))
    return _sum(g, terms)


def _sum(g: _Graph, terms: list) -> str:
    total = terms[0]
    for term in terms[1:]:
        total = g.op("Add", total, term)
    return total
