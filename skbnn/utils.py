"""Small helpers shared across modules."""

from __future__ import annotations

import numbers

import numpy as np


def seed_sequence(random_state) -> np.random.SeedSequence:
    """A ``SeedSequence`` determined by an sklearn-style ``random_state``.

    ``None`` gives fresh OS entropy, an int seeds directly, and a ``RandomState`` or
    ``Generator`` instance is consumed for 128 bits so repeated fits with the same instance
    differ, as sklearn users expect.
    """
    if random_state is None:
        return np.random.SeedSequence()
    if isinstance(random_state, numbers.Integral):
        return np.random.SeedSequence(int(random_state))
    if isinstance(random_state, np.random.RandomState):
        return np.random.SeedSequence(random_state.randint(0, 2**32, size=4, dtype=np.uint64))
    if isinstance(random_state, np.random.Generator):
        return np.random.SeedSequence(random_state.integers(0, 2**32, size=4, dtype=np.uint64))
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    raise ValueError(f"{random_state!r} cannot be used to seed a random generator")
