"""Progress of a long fit: the bar over its iterations, and how long a run may take."""

from __future__ import annotations

import threading

#: Seconds of projected sampling above which a named sampler warns before it starts.
SLOW_FIT = 180.0


def duration(seconds: float) -> str:
    """``seconds`` in the unit a reader would say them in."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


class ProgressBar:
    """A thread-safe tqdm bar over a fit's iterations: every chain's, member's or stage's
    (no-op when quiet)."""

    def __init__(self, total: int, verbose: int, desc: str):
        self._bar = None
        self._lock = threading.Lock()
        #: shown after every block's own text: the latest R-hat and ESS while extending
        self.status = ""
        if verbose > 0:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="it")

    def update(self, n: int, postfix: str | None = None) -> None:
        if self._bar is not None:
            with self._lock:
                self._bar.update(n)
                if postfix:
                    text = f"{postfix}; {self.status}" if self.status else postfix
                    self._bar.set_postfix_str(text, refresh=False)

    def extend(self, n: int) -> None:
        """``n`` more iterations to come (a chain extended)."""
        if self._bar is not None:
            with self._lock:
                self._bar.total += n
                self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
