"""The package's structure (doc/architecture.md): no module imports another in a loop, and
a module uses another's private names only where this file states why."""

import ast
import inspect
import pathlib
import re

import pytest

import skbnn
from skbnn.methods import HMC, MALA, MAMS, MCLMC, NUTS, AdaptiveMetropolis
from skbnn.methods._sampler_params import SAMPLER_DEFAULTS

ROOT = pathlib.Path(skbnn.__file__).parent


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _imported_from(module: str, node: ast.ImportFrom) -> str:
    """The absolute name of the module an ``import from`` reads."""
    if not node.level:
        return node.module or ""
    package = module.split(".")
    if not MODULES[module].name == "__init__.py":
        package = package[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def _imports(module: str) -> dict:
    """The skbnn modules ``module`` imports, each with the private names it takes from it.

    Deferred imports (inside functions) count too: a loop closed at call time is still a
    loop. Imports under ``if TYPE_CHECKING:`` do not run, so they do not count."""
    tree = ast.parse(MODULES[module].read_text())
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(map(id, ast.walk(node)))
    out: dict = {}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            source = _imported_from(module, node)
            for alias in node.names:
                if f"{source}.{alias.name}" in MODULES:  # a submodule
                    out.setdefault(f"{source}.{alias.name}", set())
                elif source in MODULES:
                    names = out.setdefault(source, set())
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        names.add(alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    out.setdefault(alias.name, set())
    out.pop(module, None)
    return out


GRAPH = {module: _imports(module) for module in MODULES}


def _cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_loop():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_another_in_a_loop():
    assert len(GRAPH) > 50 and "skbnn.methods.laplace" in GRAPH["skbnn.methods"]
    assert _cycles(GRAPH) == []


#: Private names a module may take from another, and why. Within ``skbnn.kernels`` the
#: numba helpers (``_FM``, ``_dispatch``, ``_libm``'s functions, ``_backward``, ...) are
#: shared freely: jitted kernels compose by calling jitted helpers, and the package is the
#: unit of privacy there. Everywhere else a name would be listed here with its reason,
#: and none is: what a private module offers its siblings has no underscore
#: (``methods._optim.Trainer``, ``methods._mcmc.HMCFamily``, ``metrics._scores.
#: mixture_log_density``).
ALLOWED_IMPORTS: dict[str, set[str]] = {}


def test_private_names_cross_modules_only_where_stated():
    found = []
    for module, imports in GRAPH.items():
        for source, names in imports.items():
            if module.startswith("skbnn.kernels") and source.startswith("skbnn.kernels"):
                continue
            unstated = names - ALLOWED_IMPORTS.get(source, set())
            found += [f"{module} <- {source}.{name}" for name in unstated]
    assert not found
    # every stated exception is still in use: the list shrinks as the code does
    used = {(s, n) for imports in GRAPH.values() for s, names in imports.items() for n in names}
    stale = {(s, n) for s, names in ALLOWED_IMPORTS.items() for n in names} - used
    assert not stale


#: Private attributes one module reads on objects of another: the hooks through which the
#: HMC family's driver (``_mcmc``, ``_chains``, ``_convergence``) knows its samplers
#: (``BaseMethod._fix`` among them: the runnable fix a warning names), and the standard library's
#: ``namedtuple._replace``/``_fields`` and ``sys._getframe`` (the warnings' stacklevel).
#: ``kernels/_compile.py`` reaches into numba's cache (``_CacheImpl``, ``_index_key``,
#: ``_load_index``, ``_locator_classes``), which has no public interface.
ALLOWED_ATTRIBUTES = {
    "skbnn.methods._convergence": {
        "_fix",
        "_n_modes",
        "_stop_rule",
        "_uses_step_size",
        "_kernel_diagnostics",
        "_title",
        "_coarse_advice",
        "_more_modes_fix",
        "_divergence_advice",
        "_divergent_unit",
        "_mode_of_chain",
        "_diagnostics",
    },
    "skbnn.methods._chains": {"_block_kernel", "_uses_step_size", "_replace"},
    # a sampler run as another's init names its fix through the sampler it starts
    "skbnn.methods._mcmc": {"_fix"},
    # _getvalue: numba's struct proxy's value, the documented way to build a native value
    "skbnn.kernels._compile": {
        "_CacheImpl",
        "_index_key",
        "_load_index",
        "_locator_classes",
        "_getvalue",
    },
    "skbnn.kernels.density": {"_fields"},
    "skbnn.exceptions": {"_getframe"},
    # skpro's NormalMixture keeps its parameters only as _pi, _mu and _sigma: a subset of
    # it is rebuilt from them as skbnn's subclass
    "skbnn.skpro": {"_mu"},
    "*": {"_replace"},
}


def _defined(tree: ast.AST) -> set:
    """Every name a module defines, binds, passes or spells as a string."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
    return names


def test_private_attributes_of_other_modules_are_read_only_where_stated():
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        own = _defined(tree)
        allowed = ALLOWED_ATTRIBUTES.get(module, set()) | ALLOWED_ATTRIBUTES["*"]
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")):
                continue
            if node.attr.startswith("__") or node.attr in own or node.attr in allowed:
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            found.append(f"{module}:{node.lineno} .{node.attr}")
    assert not found


@pytest.mark.parametrize("cls", [NUTS, HMC, MALA, AdaptiveMetropolis, MCLMC, MAMS])
def test_a_samplers_docstring_shows_each_parameter_in_order_with_its_default(cls):
    # the shared knobs are documented once (methods/_sampler_params.py) and written into
    # each sampler's docstring: the docs must still list all of the signature's
    section = cls.__doc__.split("    Parameters\n    ----------\n")[1].split("\n\n    Examples")[0]
    entries = re.findall(r"^    (\w[\w, ]*) : .*, default=(.*)$", section, flags=re.M)
    names = [name for key, _ in entries for name in key.split(", ")]
    signature = inspect.signature(cls).parameters
    assert names == list(signature)
    for key, stated in entries:
        keys, values = key.split(", "), stated.split(", ")
        # one default stated for a group means the same for each
        for name, value in zip(keys, values * len(keys) if len(values) == 1 else values,
                               strict=True):  # fmt: skip
            default = signature[name].default
            if isinstance(default, str):
                assert value == f'"{default}"', (name, value)
            else:
                assert value == str(default) or float(value) == default, (name, value)


def test_the_shared_sampler_knobs_are_declared_once():
    for cls in (NUTS, HMC, MALA, AdaptiveMetropolis, MCLMC, MAMS):
        source = inspect.getsource(cls)
        for name, default in SAMPLER_DEFAULTS.items():
            if name in inspect.signature(cls).parameters:
                assert inspect.signature(cls).parameters[name].default == default
                # no hand-written entry or assignment repeats a shared knob
                assert f"self.{name} = " not in source
                if name not in ("max_delta_energy",):
                    assert f"\n    {name} : " not in source, (cls.__name__, name)
