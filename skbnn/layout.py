"""Network architecture: layer shapes and the flat parameter layout.

Every method works on one flat float64 vector ``theta``. Its layout, for layer sizes
``(d, h_1, ..., h_{L-1}, k)`` (``d`` inputs, ``k`` network outputs), is::

    theta = [W_1.ravel(), b_1, W_2.ravel(), b_2, ..., W_L.ravel(), b_L, (noise)]

where ``W_l`` has shape ``(fan_in, fan_out)`` (row-major, as ``MLPRegressor.coefs_``) and
``b_l`` shape ``(fan_out,)``. A regression target with inferred noise that is sampled jointly
with the weights (the SMC methods) appends one log noise precision per output; the HMC
family keeps the noise outside ``theta`` and updates it by Gibbs steps.
"""

from __future__ import annotations

import numpy as np

ACTIVATIONS = {"identity": 0, "relu": 1, "tanh": 2, "logistic": 3}
LIKELIHOODS = {"gaussian": 0, "bernoulli": 1, "categorical": 2, "heteroscedastic": 3}


class NetworkLayout:
    """Flat-vector layout of a multilayer perceptron.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``(n_inputs, *hidden_layer_sizes, n_outputs)``.
    n_noise : int, default=0
        Number of trailing noise parameters (log precisions) appended to ``theta``.

    Attributes
    ----------
    sizes : ndarray of int64, shape (n_layers + 1,)
        Layer widths, inputs first.
    offsets : ndarray of int64, shape (n_layers,)
        Start of ``W_l`` in ``theta``; ``b_l`` starts at ``offsets[l] + sizes[l] * sizes[l+1]``.
    n_weights : int
        Number of network parameters (weights and biases).
    n_params : int
        ``n_weights + n_noise``.
    """

    def __init__(self, layer_sizes, n_noise: int = 0):
        self.sizes = np.asarray(layer_sizes, dtype=np.int64)
        if self.sizes.ndim != 1 or self.sizes.size < 2 or np.any(self.sizes < 1):
            raise ValueError(f"invalid layer sizes {tuple(layer_sizes)}")
        n_layers = self.sizes.size - 1
        self.offsets = np.zeros(n_layers, dtype=np.int64)
        pos = 0
        for layer in range(n_layers):
            self.offsets[layer] = pos
            pos += (self.sizes[layer] + 1) * self.sizes[layer + 1]
        self.n_weights = int(pos)
        self.n_noise = int(n_noise)
        self.n_params = self.n_weights + self.n_noise

    def __setstate__(self, state: dict) -> None:
        # A model loaded with joblib's mmap_mode holds read-only arrays; numba types a
        # read-only array apart from a writable one, so every kernel taking the layout
        # would compile again. Two small int arrays: own writable copies.
        self.__dict__.update(state)
        self.sizes = np.array(self.sizes, dtype=np.int64)
        self.offsets = np.array(self.offsets, dtype=np.int64)

    @property
    def n_layers(self) -> int:
        """Number of weight layers (hidden layers + 1)."""
        return self.sizes.size - 1

    def slices(self, layer: int) -> tuple[slice, slice]:
        """Slices of ``W_layer`` and ``b_layer`` (0-based layer index) in ``theta``."""
        fan_in, fan_out = int(self.sizes[layer]), int(self.sizes[layer + 1])
        start = int(self.offsets[layer])
        mid = start + fan_in * fan_out
        return slice(start, mid), slice(mid, mid + fan_out)

    def unpack(self, theta: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Views of the weight matrices and bias vectors of one parameter vector.

        Returns
        -------
        coefs, intercepts : lists of ndarray
            As ``MLPRegressor.coefs_`` and ``intercepts_``; views into ``theta``.
        """
        coefs, intercepts = [], []
        for layer in range(self.n_layers):
            w, b = self.slices(layer)
            coefs.append(theta[w].reshape(int(self.sizes[layer]), int(self.sizes[layer + 1])))
            intercepts.append(theta[b])
        return coefs, intercepts

    def unpack_draws(self, thetas: np.ndarray) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Every layer's weight matrices and bias vectors of many parameter vectors, stacked
        over the vectors: what runs all the draws of a posterior at once as batched
        matrix products (an ONNX export).

        Parameters
        ----------
        thetas : ndarray of shape (n_draws, n_params)

        Returns
        -------
        coefs : list of ndarray of shape (n_draws, fan_in, fan_out)
        intercepts : list of ndarray of shape (n_draws, fan_out)
            Copies, one per layer.
        """
        thetas = np.asarray(thetas, dtype=np.float64)
        n = thetas.shape[0]
        coefs, intercepts = [], []
        for layer in range(self.n_layers):
            w, b = self.slices(layer)
            shape = (n, int(self.sizes[layer]), int(self.sizes[layer + 1]))
            coefs.append(np.ascontiguousarray(thetas[:, w]).reshape(shape))
            intercepts.append(np.ascontiguousarray(thetas[:, b]))
        return coefs, intercepts

    def fan_in(self) -> np.ndarray:
        """Fan-in of the layer each network parameter belongs to (biases get 0)."""
        out = np.zeros(self.n_weights)
        for layer in range(self.n_layers):
            w, _ = self.slices(layer)
            out[w] = self.sizes[layer]
        return out
