"""Numba kernels (arrays in, arrays out), one module per role:

* ``density``: the network's log density and gradient, assembled from the parts below; the
  ``KernelTarget`` and ``DensityTarget`` every kernel takes; batch evaluations.
* ``layers``, ``backprop``: the forward pass; the weight gradient, backpropagation and the
  Jacobian.
* ``gemm``: the same three products on wide layers, by BLAS's matrix product.
* ``team``, ``helper``: a helper thread that takes half of a lone network's wide
  products, minibatch gathers, Adam steps and LBBNN passes, with the same bits as one
  thread; the hand-off slot and its atomics, and the helper's loop and context.
* ``likelihoods``, ``priors``: the log-likelihood and log-prior terms and their gradients.
* ``_libm``: exp, log, tanh and the logistic function in vectorizable arithmetic.
* ``cpu``: what the kernels' code depends on of the CPU they compile for.
* ``_compile``: how the kernels compile and are cached; compiling in a helper process.
* ``linalg``, ``integrators``: vector helpers and metrics; leapfrog, momenta, energy.
* ``transitions``: one MCMC transition each (NUTS, static HMC, MALA, random walk).
* ``gibbs``: exact conditional moves (noise, layer precisions, output layer, ReLU scales).
* ``adaptation``: step-size dual averaging, Welford metric estimates.
* ``chain``: a chain's named state and the warm-up/sampling blocks the chain driver runs.
* ``smc``: the SMC particles' moves and evaluations.
* ``optim``: the training engine's minibatch epoch (Adam, SGD, SWAG's moments).
* ``vi``: the variational methods' kernels.
* ``predict``: mixture quantiles for predictive intervals.
"""
