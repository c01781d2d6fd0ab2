"""The package's version, in a module of its own: ``estimators`` reads it when it pickles,
and importing it from the package's ``__init__`` would close an import loop."""

__version__ = "0.1.0"
