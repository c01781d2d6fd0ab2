"""Sphinx configuration of skbnn's documentation site.

Build it (offline, warnings as errors) with::

    pip install ".[doc]"
    python -m sphinx -W -b html doc doc/_build/html

The markdown pages are MyST; the API pages are autosummary over numpydoc docstrings; the
gallery runs ``examples/plot_*.py`` with sphinx-gallery and shows the other examples as
code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The installed skbnn (pip install ".[doc]"), whose numba cache the tests have warmed.
# `python -m sphinx` puts the working directory first on sys.path, and from the
# repository's root that is the source tree, whose kernels have no cache: the gallery
# would compile every method again. (With an editable install the two are the same.)
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE.parent]
import skbnn  # noqa: E402

# the gallery's figures are files, never windows
os.environ.setdefault("MPLBACKEND", "Agg")

project = "skbnn"
author = "the skbnn developers"
copyright = "2026, the skbnn developers"  # noqa: A001
release = version = skbnn.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx_gallery.gen_gallery",
]

root_doc = "index"
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "auto_examples/*.ipynb",
                    "auto_examples/*.py", "auto_examples/*.zip", "auto_examples/*.md5",
                    "auto_examples/*.json"]  # fmt: skip
templates_path = ["_templates"]

# MyST: GitHub-style anchors, so the pages' links work on GitHub and on the site alike
myst_heading_anchors = 4
myst_enable_extensions = ["dollarmath"]
suppress_warnings = ["myst.header"]  # the pages start at "#" and go down one level at a time

# API reference: one page per public name, from its numpydoc docstring
autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"  # numpydoc's Parameters sections say it
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    # only the plot_ scripts run during the build; the others are argparse scripts of
    # minutes, shown as code
    "filename_pattern": r"/plot_",
    "ignore_pattern": r"__init__\.py",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "show_memory": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "min_reported_time": 1,
    "write_computation_times": False,
}

html_theme = "pydata_sphinx_theme"
html_title = f"skbnn {version}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_static_path: list[str] = []
html_show_sourcelink = False


def _skip_inherited_request_setters(app, what, name, obj, skip, options):
    """scikit-learn's generated ``set_*_request`` methods point into scikit-learn's own
    glossary; they are documented there."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_inherited_request_setters)
