"""Check a built site: every gallery script's figures are in its HTML page.

sphinx-gallery writes each figure of ``examples/plot_<name>.py`` as
``sphx_glr_plot_<name>_NNN.png``; this checks that every such script has at least one,
that its page shows each of them, and that each file was copied into the site::

    python -m sphinx -W -b html doc doc/_build/html && python doc/check_build.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent
EXAMPLES = DOC.parent / "examples"


def problems(html: Path = DOC / "_build" / "html") -> list[str]:
    """What is missing, one sentence each; empty when every figure renders."""
    found = []
    for script in sorted(EXAMPLES.glob("plot_*.py")):
        page = html / "auto_examples" / f"{script.stem}.html"
        if not page.exists():
            found.append(f"{page} is missing")
            continue
        figures = set(re.findall(rf"sphx_glr_{script.stem}_\d+\.png", page.read_text()))
        if not figures:
            found.append(f"{page.name} shows no figure of {script.name}")
        for name in sorted(figures):
            if not (html / "_images" / name).exists():
                found.append(f"{page.name} shows {name}, which the site does not hold")
    return found


if __name__ == "__main__":
    missing = problems()
    print("\n".join(missing) or "every gallery figure is in the built site")
    sys.exit(1 if missing else 0)
