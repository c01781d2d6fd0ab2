"""Parallel tempering (``n_temperatures > 1``) of the HMC family.

The swap move is tested on its own, where local moves cannot hide an error: its ratio
against the kernel's tempered densities, its bookkeeping, and, from exact draws of each
replica's tempered posterior (Bayesian linear regression), that one round of swaps leaves
the cold replica's distribution exact. Whole runs are then checked against closed forms
and, on a posterior with two symmetric modes, shown to visit both, which single chains do
not.
"""

import numpy as np
import pytest
from scipy import stats
from scipy.special import logsumexp

from skbnn import BayesianMLPRegressor
from skbnn.kernels import density as knet
from skbnn.kernels.chain import make_chain
from skbnn.log_posterior import LogPosterior
from skbnn.methods import HMC, NUTS
from skbnn.methods._chains import ChainState
from skbnn.methods._tempering import ReplicaExchange
from skbnn.priors import GaussianPrior, HierarchicalPrior

# short runs may warn of convergence; that is not what these tests are about
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

A, B = 2.0, 0.5  # Gamma prior of the noise precision in the swap tests (not the default)


def _linear_target(noise, n_rows=30, seed=0, prior=None):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, 2))
    y = X @ np.array([0.8, -0.4]) + 0.3 + 0.5 * rng.standard_normal(n_rows)
    prior = GaussianPrior(fan_in_scaling=False) if prior is None else prior
    target = LogPosterior(
        X, y, (), "identity", "gaussian", prior=prior, noise=noise, noise_precision=4.0,
        noise_shape=A, noise_rate=B,
    )  # fmt: skip
    return target, X, y


def _replica(target, theta, beta, tau=None):
    """A replica as the driver holds it, at ``theta`` and inverse temperature ``beta``."""
    tgt = knet.density_target(target.kernel_target(own=True))
    tgt.cfg[0]["beta"] = beta
    if tau is not None:
        tgt.tau[:] = tau
    chain = ChainState(
        rng=None,
        arrays=make_chain(np.array(theta, dtype=float), 2 + target.n_outputs),
        tgt=tgt,
        ws_size=0,
        ws=target.workspace(),
    )
    ReplicaExchange._refresh(chain)
    return chain


def _exchange(target, ladders, betas, seed=0):
    rngs = [np.random.default_rng([seed, i]) for i in range(len(ladders))]
    return ReplicaExchange(ladders, rngs, np.asarray(betas, dtype=float), target, [])


@pytest.mark.parametrize("noise", ["fixed", "gibbs", "marginal", "theta"])
def test_swap_ratio_equals_the_kernels_tempered_densities(noise):
    # log r = log pi_b1(x2) + log pi_b2(x1) - log pi_b1(x1) - log pi_b2(x2), with each
    # state's own noise precision; the priors cancel, so the kernel's densities give it
    target, _, _ = _linear_target(noise)
    rng = np.random.default_rng(1)
    b1, b2 = 0.9, 0.35
    for _ in range(5):
        t1, t2 = rng.standard_normal((2, target.n_params))
        tau1, tau2 = rng.gamma(2.0, 2.0, size=2)

        def logp(theta, tau, beta):
            return _replica(target, theta, beta, [tau]).arrays.state[0]["logp"]

        expected = logp(t2, tau2, b1) + logp(t1, tau1, b2) - logp(t1, tau1, b1) - logp(t2, tau2, b2)
        x, y = _replica(target, t1, b1, [tau1]), _replica(target, t2, b2, [tau2])
        ex = _exchange(target, [[x, y]], [b1, b2])
        got = (
            ex._tempered_loglik(y, b1) + ex._tempered_loglik(x, b2)
            - ex._tempered_loglik(x, b1) - ex._tempered_loglik(y, b2)
        )  # fmt: skip
        assert got == pytest.approx(expected, rel=1e-10, abs=1e-9)


def test_swap_moves_the_whole_state_and_refreshes_the_density():
    target, _, _ = _linear_target("gibbs", prior=HierarchicalPrior(2.0, 2.0, fan_in_scaling=False))
    rng = np.random.default_rng(2)
    t1, t2 = rng.standard_normal((2, target.n_params))
    x, y = _replica(target, t1, 1.0, [3.0]), _replica(target, t2, 0.4, [0.5])
    x.tgt.prior_scale[:] = 0.7  # a hierarchical prior's scales are part of the state
    ReplicaExchange._refresh(x)
    ex = _exchange(target, [[x, y]], [1.0, 0.4])
    ex._swap_states(x, y)
    np.testing.assert_array_equal(x.arrays.q, t2)
    np.testing.assert_array_equal(y.arrays.q, t1)
    assert x.tgt.tau[0] == 0.5 and y.tgt.tau[0] == 3.0
    np.testing.assert_array_equal(y.tgt.prior_scale, 0.7)
    np.testing.assert_array_equal(x.tgt.prior_scale, 1.0)
    assert x.tgt.cfg[0]["beta"] == 1.0 and y.tgt.cfg[0]["beta"] == 0.4  # temperatures stay
    for c in (x, y):
        fresh = _replica(target, c.arrays.q, c.tgt.cfg[0]["beta"], c.tgt.tau)
        fresh.tgt.prior_scale[:] = c.tgt.prior_scale
        ReplicaExchange._refresh(fresh)
        logp, fresh_logp = c.arrays.state[0]["logp"], fresh.arrays.state[0]["logp"]
        assert logp == pytest.approx(fresh_logp, rel=1e-12)
        np.testing.assert_allclose(c.arrays.grad, fresh.arrays.grad, rtol=1e-12)


def test_round_trips_count_cold_to_hot_and_back():
    # equal betas accept every swap, so the even/odd rounds rotate the states through the
    # ladder deterministically; state 2 starts hot, and its first arrival at the cold end
    # (round 2) is not a round trip
    target, _, _ = _linear_target("fixed")
    rng = np.random.default_rng(5)
    ladder = [_replica(target, rng.standard_normal(target.n_params), 1.0) for _ in range(3)]
    ex = _exchange(target, [ladder], [1.0, 1.0, 1.0])
    trips = []
    for round_ in range(9):
        ex.exchange(round_)
        trips.append(int(ex.round_trips[0]))
    assert trips == [0, 0, 0, 0, 1, 1, 2, 2, 3]
    np.testing.assert_array_equal(ex.ids[0], [2, 1, 0])


def _exact_tempered_draws(X, y, beta, noise, size, rng):
    """Exact draws of (theta, tau) from prior * likelihood**beta of the linear model.

    Given tau the weights are Gaussian. With a fixed precision (4) that is all; otherwise
    tau's tempered marginal is one-dimensional, p(tau) tau^(beta n/2) (beta tau)^(-n/2)
    N(y | 0, Phi S Phi^T + I / (beta tau)), drawn on a fine grid of log tau.
    """
    phi = np.hstack([X, np.ones((len(X), 1))])
    n = len(y)
    if noise == "fixed":
        taus = np.full(size, 4.0)
    else:
        log_tau = np.linspace(-4.0, 6.0, 4001)
        k = phi @ phi.T
        log_post = np.empty_like(log_tau)
        for i, lt in enumerate(log_tau):
            tau = np.exp(lt)
            cov = k + np.eye(n) / (beta * tau)
            _, logdet = np.linalg.slogdet(cov)
            log_post[i] = (
                -0.5 * (logdet + y @ np.linalg.solve(cov, y))
                + 0.5 * beta * n * lt - 0.5 * n * np.log(beta * tau)
                + A * lt - B * tau  # Gamma(A, B) with the Jacobian of log tau
            )  # fmt: skip
        w = np.exp(log_post - logsumexp(log_post))
        cell = log_tau[1] - log_tau[0]
        taus = np.exp(rng.choice(log_tau, size=size, p=w) + cell * (rng.random(size) - 0.5))
    thetas = np.empty((size, phi.shape[1]))
    for i, tau in enumerate(taus):
        prec = beta * tau * phi.T @ phi + np.eye(phi.shape[1])
        cov = np.linalg.inv(prec)
        thetas[i] = rng.multivariate_normal(cov @ (beta * tau * phi.T @ y), cov)
    return thetas, taus


@pytest.mark.statistical
@pytest.mark.parametrize("noise", ["fixed", "gibbs", "marginal"])
def test_swaps_keep_exact_tempered_draws_exact(noise, seed):
    # Each of M independent ladders (betas 1, 0.45, 0.2) starts from exact draws of its
    # replicas' tempered posteriors; a swap round on (0, 1), then one on (1, 2), must leave
    # every replica exactly distributed. A wrong ratio puts hot draws in the cold slot (its
    # log-likelihood falls) or cold ones in a hot slot. (A noise precision left behind
    # barely shows here, since its conditional hardly depends on beta; the bookkeeping test
    # above catches that.) The ladders are independent, so every comparison below is of
    # means of M independent draws: 4 standard errors, two-sided normal, 6.3e-5 each; 3
    # comparisons (6 with the Gibbs noise): 1.9e-4 (3.8e-4). 2 s.
    target, X, y = _linear_target(noise, seed=0 + seed)
    z = target.YT
    betas = [1.0, 0.45, 0.2]
    m = 3000
    rng = np.random.default_rng(3 + seed)
    draws = [_exact_tempered_draws(X, z, b, noise, m, rng) for b in betas]
    ladders = [
        [_replica(target, draws[k][0][i], b, [draws[k][1][i]]) for k, b in enumerate(betas)]
        for i in range(m)
    ]
    ex = _exchange(target, ladders, betas, seed=0 + seed)
    ex.exchange(0)
    ex.exchange(1)
    # the test exercises swaps: both outcomes are common. The rates were 0.40-0.55 for
    # data seeds 0-2 (they depend on the data only through the posterior's spread), each a
    # mean of 3000 independent swaps (sd < 0.01), so the band is over 15 sd from them
    accept = ex.accepts.sum(axis=0) / ex.attempts.sum(axis=0)
    assert np.all((accept > 0.2) & (accept < 0.95)), accept

    # the residual sum of squares of each slot against fresh exact draws at its beta
    fresh = [_exact_tempered_draws(X, z, b, noise, m, rng) for b in betas]
    phi = np.hstack([X, np.ones((len(X), 1))])
    for k in range(len(betas)):
        ssr = np.array([ladder[k].arrays.stats[2] for ladder in ladders])
        ssr_ref = np.sum((phi @ fresh[k][0].T - z[:, None]) ** 2, axis=0)
        se = np.sqrt(ssr.var() / m + ssr_ref.var() / m)
        assert abs(ssr.mean() - ssr_ref.mean()) < 4 * se, (k, ssr.mean(), ssr_ref.mean())
        if noise == "gibbs":
            tau = np.array([ladder[k].tgt.tau[0] for ladder in ladders])
            se = np.sqrt(tau.var() / m + fresh[k][1].var() / m)
            assert abs(tau.mean() - fresh[k][1].mean()) < 4 * se, (k, tau.mean())


def _sign_problem():
    # f(x) = v tanh(w x + b) + c is unchanged by (w, b, v) -> (-w, -b, -v), so the posterior
    # has two mirror modes of equal mass; the data pin |v| near 2, far from 0, where the
    # modes meet, so a local sampler stays in the mode it starts in
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, (40, 1))
    y = 2 * np.tanh(1.5 * X[:, 0]) + 0.1 * rng.standard_normal(40)
    return X, y


def _sign_fit(n_temperatures, n_chains, random_state):
    """``n_chains`` NUTS chains of 1000 kept draws each; the output weight v of each draw."""
    X, y = _sign_problem()
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(1,),
        activation="tanh",
        method=NUTS(
            n_chains=n_chains, n_warmup=300, n_temperatures=n_temperatures, max_temperature=100.0
        ),
        n_samples=1000 * n_chains,
        random_state=random_state,
    ).fit(X, y)
    return reg, reg.posterior_.thetas.reshape(n_chains, 1000, -1)[:, :, 2]


@pytest.mark.statistical
def test_single_chains_stay_in_one_mirror_mode(seed):
    # the problem needs tempering: every kept draw of a chain has the sign it settled on in
    # warm-up. Between the modes the network is a constant, whose marginal likelihood is
    # about 110 nats below the fit's (40 rows, residual sd 0.1 against the data's 1.6), so a
    # crossing after warm-up has probability of order e^-100. (No ConvergenceWarning: the
    # modes are one function, and R-hat is taken of functions.) 0.3 s.
    _, v = _sign_fit(1, 4, 0 + seed)
    assert set((v > 0).mean(axis=1)) <= {0.0, 1.0}


@pytest.mark.statistical
def test_tempering_visits_both_mirror_modes(seed):
    # By the symmetry P(v > 0) = 1/2, and a chain's fraction of positive draws is
    # symmetric about 1/2 in law. Its Monte Carlo error comes from the 12 independent chains
    # themselves (each has its own seed): t = (mean - 1/2) / (sd / sqrt(12)) follows
    # Student's t with 11 degrees of freedom (closely, for a symmetric bounded statistic;
    # the t law accounts for the sd being estimated), and |t| > 4.44 has probability 1e-3.
    # This needs no ESS estimate, which on this bimodal indicator varies five-fold between
    # runs of the same length (31-360 for 4 chains x 2000 draws). Over 20 runs of this
    # design (seeds 200-219) |t| stayed below 1.9; over 240 chains of 1000 draws a chain's
    # fraction had sd 0.13 and ranged 0.09-0.82. 3.5 s.
    reg, v = _sign_fit(6, 12, 0 + seed)
    positive = (v > 0).astype(float)
    per_chain = positive.mean(axis=1)
    # every chain visits both modes: each round trip brings back a state from the hottest
    # replica (beta = 0.01, nearly the prior), in either mode with probability about 1/2,
    # so with 20 or more round trips (30 on average over 240 chains, never fewer than 20)
    # a chain that never changes mode has probability about 2^-20 (1e-5 for 12 chains)
    assert np.all((per_chain > 0.0) & (per_chain < 1.0)), per_chain
    t = (per_chain.mean() - 0.5) / (per_chain.std(ddof=1) / np.sqrt(len(per_chain)))
    assert abs(t) < stats.t.ppf(1 - 5e-4, len(per_chain) - 1), (per_chain.mean(), t)

    tempering = reg.diagnostics_["tempering"]
    assert tempering["betas"].shape == (12, 6)
    np.testing.assert_allclose(tempering["betas"][:, 0], 1.0)
    np.testing.assert_allclose(tempering["betas"][:, -1], 0.01)
    assert np.all(np.diff(tempering["betas"], axis=1) < 0)
    assert tempering["swap_accept"].shape == (12, 5)
    # round trips per chain (1000 kept rounds): 30 on average, sd 3.7, over 240 chains; a
    # Poisson count of mean 30 (more dispersed than these) is below 5 with probability
    # 4e-9, so 12 chains: 4e-8
    assert np.all(tempering["round_trips"] >= 5), tempering["round_trips"]
    # the hot replicas' gradients are part of the cost: with them the total is 5.9-6.9
    # times the cold replicas' kept leapfrog steps (20 runs; 5.1-7.5 over 56 runs of 4
    # chains), without them 1.4 (untempered chains: warm-up and kept steps); the bar 3 is
    # more than 10 sd below the mean of 6.3
    cold_only = reg.diagnostics_["mean_n_leapfrog"].sum() * 1000
    assert reg.diagnostics_["n_grad_evals"] > 3 * cold_only


def test_tempering_draws_do_not_depend_on_n_jobs():
    X, y = _sign_problem()

    def fit(n_jobs):
        return BayesianMLPRegressor(
            hidden_layer_sizes=(1,),
            activation="tanh",
            method=HMC(n_chains=2, n_warmup=50, n_temperatures=3),
            n_samples=100,
            random_state=4,
            n_jobs=n_jobs,
        ).fit(X, y)

    one, two = fit(1), fit(2)
    np.testing.assert_array_equal(one.posterior_.thetas, two.posterior_.thetas)
    np.testing.assert_array_equal(
        one.diagnostics_["tempering"]["betas"], two.diagnostics_["tempering"]["betas"]
    )


def test_one_temperature_is_plain_sampling():
    X, y = _sign_problem()
    kw = dict(hidden_layer_sizes=(1,), activation="tanh", n_samples=100, random_state=0)
    plain = BayesianMLPRegressor(method=NUTS(n_chains=2, n_warmup=50), **kw).fit(X, y)
    one = BayesianMLPRegressor(
        method=NUTS(n_chains=2, n_warmup=50, n_temperatures=1, max_temperature=50.0), **kw
    ).fit(X, y)
    np.testing.assert_array_equal(plain.posterior_.thetas, one.posterior_.thetas)
    assert "tempering" not in one.diagnostics_


@pytest.mark.parametrize("params", [{"n_temperatures": 0}, {"max_temperature": 0.5}])
def test_tempering_parameters_are_validated(params):
    X, y = _sign_problem()
    reg = BayesianMLPRegressor(method=NUTS(**params), n_samples=10)
    with pytest.raises(ValueError, match=next(iter(params))):
        reg.fit(X, y)


def test_short_warmup_keeps_the_geometric_ladder():
    # fewer than 20 warm-up iterations have no metric windows, so nothing respaces it
    X, y = _sign_problem()
    reg = BayesianMLPRegressor(
        hidden_layer_sizes=(1,),
        activation="tanh",
        method=NUTS(n_chains=2, n_warmup=10, n_temperatures=3, max_temperature=4.0),
        n_samples=20,
        random_state=0,
    ).fit(X, y)
    np.testing.assert_allclose(reg.diagnostics_["tempering"]["betas"], [[1.0, 0.5, 0.25]] * 2)
