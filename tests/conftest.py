"""Shared test fixtures: one seed offset for every statistical test.

Tests whose assertions depend on a random outcome (sampler output, ESS, R-hat, coverage,
evidence, acceptance rates, warnings of short runs) are marked ``statistical`` and add the
``seed`` fixture to every seed they use, so that

    SKBNN_TEST_SEED_OFFSET=7 pytest -m statistical

reruns them all on other data and other chains. Their tolerances come from Monte Carlo
standard errors or a stated false-alarm probability, so they must pass for (almost) every
offset, not only for the one they were written with; ``benchmarks/seed_sweep.py`` counts
the failures over many offsets against the rate the tolerances imply.
"""

from __future__ import annotations

import os

import pytest

#: What ``SKBNN_TEST_SEED_OFFSET`` adds to every seed of the statistical tests (0 by default).
SEED_OFFSET = int(os.environ.get("SKBNN_TEST_SEED_OFFSET", "0"))


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "statistical: asserts a random outcome, within a tolerance from Monte Carlo error "
        "or a stated false-alarm probability; its seeds move with SKBNN_TEST_SEED_OFFSET",
    )
    config.addinivalue_line(
        "markers",
        "dask: starts a distributed LocalCluster of worker processes (tests/test_dask.py); "
        'deselect with -m "not dask"',
    )


def pytest_report_header(config):
    return f"skbnn test seed offset: {SEED_OFFSET} (SKBNN_TEST_SEED_OFFSET)"


@pytest.fixture
def seed() -> int:
    """The offset to add to every seed of a statistical test (``SKBNN_TEST_SEED_OFFSET``)."""
    return SEED_OFFSET
