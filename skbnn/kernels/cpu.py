"""The CPU the kernels compile for, as far as the kernels' code depends on it."""

from ._compile import target_features


def _compiles_for_avx512() -> bool:
    """Whether numba compiles for a CPU with AVX-512 (the host's, or ``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES``): thirty-two vector registers, where AVX2 and SSE2 have sixteen."""
    return "+avx512f" in target_features()


# The weight gradient's four-by-four passes keep sixteen sums and eight loaded vectors in
# registers: twenty-four, which AVX-512's thirty-two hold, and AVX2's or SSE2's sixteen do
# not (the sums spill, and the passes run slower than by pairs). Only
# AVX-512 builds compile them (numba prunes a branch on this constant before typing it).
# numba's cache is keyed by the same CPU name and features, so a cached kernel always had
# this value.
_FOUR_BY_FOUR = _compiles_for_avx512()
