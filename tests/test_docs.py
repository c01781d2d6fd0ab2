"""The docs say what the code does: the generated methods table is current, the
documented Pipeline pattern for predictive sds and intervals works, the README stays a
short page whose commands are CI's, and the pages' links lead somewhere."""

import importlib.util
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import skbnn
import skbnn.pipeline

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "doc"


def _doc_module(name):
    spec = importlib.util.spec_from_file_location(name, DOC / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _methods_table():
    return _doc_module("methods_table")


def _benchmark(monkeypatch, name, module_name, folder="benchmarks"):
    """``<folder>/<name>.py`` (a benchmark, or an example) as a module, its sibling modules
    importable."""
    monkeypatch.syspath_prepend(str(ROOT / folder))
    spec = importlib.util.spec_from_file_location(module_name, ROOT / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _marked_table(page, tag):
    """The text between ``<!-- {tag}-table:start -->`` and its end marker in doc/<page>,
    without the indent the markers share (a table inside a list item)."""
    text = (DOC / page).read_text()
    pattern = f"^( *)<!-- {tag}-table:start -->\n(.*?)^\\1<!-- {tag}-table:end -->"
    match = re.search(pattern, text, re.S | re.M)
    assert match, f"doc/{page} lost its {tag}-table markers"
    indent = len(match[1])
    return "".join(line[indent:] if line.strip() else line.lstrip(" ")
                   for line in match[2].splitlines(keepends=True))  # fmt: skip


def test_choosing_table_matches_the_benchmark_results():
    # doc/choosing.md's cost-against-fidelity table is rendered from benchmarks/results
    table = _doc_module("choosing_table")
    documented = table.current((DOC / "choosing.md").read_text())
    assert documented is not None, "doc/choosing.md lost its table markers"
    assert documented == table.render(), (
        "doc/choosing.md's table differs from benchmarks/results; regenerate it with "
        "`python doc/choosing_table.py --write`"
    )


def test_architecture_tables_match_the_benchmark_results(monkeypatch):
    # doc/choosing.md's architecture-selection tables are benchmarks/architecture.py's report
    # of its results file
    module = _benchmark(monkeypatch, "architecture", "architecture")
    results = ROOT / "benchmarks" / "results" / "architecture.jsonl"
    seeds = ROOT / "benchmarks" / "results" / "architecture_seeds.jsonl"
    ensemble = ROOT / "benchmarks" / "results" / "uci_ensemble.jsonl"
    tables = [
        # SMC's rules at its defaults, 500 particles (the cheaper setting is a bullet below)
        ("architecture", module.report(results, (500, 5, 0.5)),
         "--report benchmarks/results/architecture.jsonl --smc-setting 500 5 0.5"),
        # the evidence's spread over training seeds
        ("seeds", module.report_seeds(seeds),
         "--report-seeds benchmarks/results/architecture_seeds.jsonl"),
        # the screen's margins replayed on the SMC runs
        ("margins", module.report_margins(results, [0, 10, 20, 50, 100]),
         "--report-margins benchmarks/results/architecture.jsonl"),
        # SMC's choice sampled by NUTS against the fixed network and the published figures
        ("goals", module.report_goals(results, ensemble),
         "--report-goals benchmarks/results/architecture.jsonl "
         "--ensemble benchmarks/results/uci_ensemble.jsonl"),
    ]  # fmt: skip
    for tag, table, command in tables:
        assert _marked_table("choosing.md", tag) == table, (
            f"doc/choosing.md's {tag} table differs from its results file; paste "
            f"`python benchmarks/architecture.py {command}` between the markers"
        )


@pytest.mark.parametrize(
    # the page and its marker, the script (folder/name), its results file, the extra
    # arguments of its report() for the part the marker holds, and the command's flags
    ("page", "tag", "script", "results", "args", "flags"),
    [
        ("conformal.md", "conformal", "benchmarks/conformal", "conformal.jsonl", (), ""),
        ("shift.md", "shift", "benchmarks/shift", "shift.jsonl", (), ""),
        ("onnx.md", "onnx", "benchmarks/onnx_export", "onnx_export.jsonl", (), ""),
        ("defaults.md", "width", "benchmarks/many_rows", "many_rows_width.jsonl", (), ""),
        ("testing.md", "sbc", "benchmarks/sbc", "sbc.jsonl", (), ""),
        ("testing.md", "seed-sweep", "benchmarks/seed_sweep", "seed_sweep.jsonl", (), ""),
        ("samplers.md", "sghmc-bias", "benchmarks/sghmc_bias", "sghmc_bias.jsonl", (), ""),
        ("samplers.md", "metric-spectrum", "benchmarks/metric_spectrum", "metric_spectrum.jsonl",
         (), ""),
        ("samplers.md", "uci-converged", "benchmarks/uci",
         "uci_nuts_converged600.jsonl uci_nuts.jsonl", ("converged",), " --table converged"),
        ("samplers.md", "uci-converged-splits", "benchmarks/uci",
         "uci_nuts_converged.jsonl uci_nuts.jsonl", ("converged-splits",),
         " --table converged-splits"),
        ("samplers.md", "init-map", "benchmarks/uci", "init_map.jsonl", ("init-map",),
         " --table init-map"),
        ("samplers.md", "many-chains", "benchmarks/uci", "many_chains.jsonl", ("many-chains",),
         " --table many-chains"),
        ("samplers.md", "friedman-advice", "benchmarks/uci", "friedman_advice.jsonl",
         ("friedman-advice",), " --table friedman-advice"),
        ("samplers.md", "follow-modes", "benchmarks/follow_modes", "follow_modes.jsonl", (), ""),
        ("samplers.md", "follow-modes-floor", "benchmarks/follow_modes", "follow_modes_floor.jsonl",
         (), ""),
        ("samplers.md", "nuts-metric", "benchmarks/uci", "nuts_metric.jsonl", ("metric",),
         " --table metric"),
        ("samplers.md", "compare-nuts-peers", "benchmarks/compare_nuts",
         "compare_nuts_metric.jsonl", (4, "peers"), " --table peers"),
        ("samplers.md", "compare-nuts-seeds", "benchmarks/compare_nuts",
         "compare_nuts_seeds.jsonl", (4, "seeds"), " --table seeds"),
        ("samplers.md", "uci-sghmc", "benchmarks/uci",
         "uci_sghmc_map.jsonl uci_sghmc.jsonl uci_ensemble_defaults.jsonl uci_nuts.jsonl",
         ("ll-time",), " --table ll-time"),
        ("samplers.md", "classifier-modes", "benchmarks/defaults",
         "defaults_classifier_modes.jsonl", ("spread",), " --suite spread"),
        ("dask.md", "dask-compile", "benchmarks/dask_compile", "dask_compile.jsonl", (), ""),
        ("performance.md", "compare-nuts", "benchmarks/compare_nuts",
         "compare_nuts_issue22.jsonl", (4,), " --runs 4"),
        ("performance.md", "kernel-speed", "benchmarks/kernel_speed", "kernel_speed.jsonl", (),
         ""),
        ("performance.md", "nuts-boston", "benchmarks/nuts_boston",
         "nuts_boston_converged.jsonl", (), ""),
        ("performance.md", "smc-boston", "benchmarks/smc_boston", "smc_boston.jsonl", (), ""),
        ("performance.md", "smc-evidence-spread", "benchmarks/smc_evidence_spread",
         "smc_evidence_spread.jsonl", (), ""),
        ("performance.md", "smc-knobs", "benchmarks/smc_knobs", "smc_knobs.jsonl", (), ""),
        ("performance.md", "wide-gradient", "benchmarks/wide_gradient", "wide_gradient.jsonl", (),
         ""),
        ("performance.md", "sampler-options", "benchmarks/sampler_options",
         "sampler_options.jsonl", (), ""),
        ("performance.md", "noise-update", "benchmarks/noise_update", "noise_update.jsonl", (),
         ""),
        ("performance.md", "scale-million", "benchmarks/scale", "scale.jsonl", ("million",), ""),
        ("performance.md", "scale-torch", "benchmarks/scale", "scale.jsonl", ("torch",),
         " --part torch"),
        ("dask.md", "dask-cluster", "benchmarks/dask_compile", "dask_cluster.jsonl", ("cluster",),
         ""),
        ("defaults.md", "defaults", "benchmarks/defaults", "defaults_methods.jsonl", (),
         " --suite methods"),
        ("choosing.md", "auto", "benchmarks/auto", "auto.jsonl", (), ""),
        ("choosing.md", "crossover", "benchmarks/crossover", "crossover.jsonl", (), ""),
        ("choosing.md", "screening", "benchmarks/screening", "screening.jsonl", (), ""),
        ("choosing.md", "priors-short", "benchmarks/defaults", "defaults.jsonl",
         ("priors", True), " --suite priors --short"),
        ("user_guide.md", "priors", "benchmarks/defaults", "defaults.jsonl", ("priors",),
         " --suite priors"),
        ("samplers.md", "modes", "benchmarks/modes", "modes.jsonl", (), ""),
        ("samplers.md", "mclmc_ess", "benchmarks/mclmc_ess", "mclmc_ess_blackjax.jsonl", (), ""),
        ("samplers.md", "mclmc_ess_one", "benchmarks/mclmc_ess", "mclmc_ess.jsonl", (), ""),
        ("samplers.md", "mcmc-fixed", "benchmarks/mcmc_family", "mcmc_family.jsonl", ("fixed",),
         ""),
        ("samplers.md", "mcmc-inferred", "benchmarks/mcmc_family", "mcmc_family.jsonl",
         ("inferred",), ""),
        ("optimization.md", "mnist", "benchmarks/mnist",
         "mnist.jsonl mnist_ensemble_whole_fit.jsonl", (), ""),
        ("optimization.md", "laplace-evidence", "benchmarks/laplace_evidence",
         "laplace_evidence.jsonl", (), ""),
        ("optimization.md", "compare-laplace", "benchmarks/compare_laplace",
         "compare_laplace.jsonl", (), ""),
        ("optimization.md", "compare-laplace-kron", "benchmarks/compare_laplace",
         "compare_laplace_kron.jsonl", (), ""),
        ("optimization.md", "uci-vi", "benchmarks/uci", "uci_vi.jsonl", (), ""),
        ("optimization.md", "compare-vi", "benchmarks/compare_vi", "compare_vi.jsonl", (), ""),
        ("optimization.md", "lbbnn-simulation", "benchmarks/lbbnn_simulation",
         "lbbnn_simulation.jsonl", (), ""),
        ("optimization.md", "lbbnn-digits", "benchmarks/lbbnn_digits", "lbbnn_digits.jsonl", (),
         ""),
        ("optimization.md", "mnist-epoch", "benchmarks/mnist_epoch", "mnist_epoch.jsonl",
         ("torch", "b2c8f60", "8d9b106"), " --table torch --commits b2c8f60 8d9b106"),
        ("optimization.md", "mnist-epoch-lbbnn", "benchmarks/mnist_epoch",
         "mnist_epoch_lbbnn.jsonl", ("steps", "f1c8224"), " --table steps --commits f1c8224"),
        ("optimization.md", "mnist-vi-curve", "benchmarks/mnist_vi_curve",
         "mnist_vi_curve.jsonl", (), ""),
        ("optimization.md", "lbbnn-families", "benchmarks/defaults", "defaults_lbbnn.jsonl",
         ("families",), " --suite families"),
        ("optimization.md", "uci-ensemble-ll", "benchmarks/uci",
         "uci_ensemble.jsonl uci_rms.jsonl uci_swag.jsonl", ("ll",), " --table ll"),
        ("optimization.md", "uci-ensemble-rmse", "benchmarks/uci",
         "uci_ensemble.jsonl uci_rms.jsonl uci_swag.jsonl", ("rmse",), " --table rmse"),
        ("optimization.md", "compare-ensemble", "benchmarks/compare_ensemble",
         "compare_ensemble.jsonl", (), ""),
        ("optimization.md", "mnist-epoch-threads", "benchmarks/mnist_epoch",
         "mnist_epoch_lbbnn.jsonl", ("threads", "d42e108"), " --table threads --commits d42e108"),
        ("optimization.md", "mnist-epoch-helper", "benchmarks/mnist_epoch",
         "mnist_epoch_lbbnn.jsonl", ("runs", "ae0b966", "c6de715"),
         " --table runs --commits ae0b966 c6de715"),
        ("optimization.md", "mnist-epoch-epyc", "benchmarks/mnist_epoch",
         "mnist_epoch_lbbnn.jsonl", ("runs", "fd885ba", "81ab6f7"),
         " --table runs --commits fd885ba 81ab6f7"),
        ("optimization.md", "mnist-epoch-torch-epyc", "benchmarks/mnist_epoch",
         "mnist_epoch.jsonl", ("torch", "81ab6f7"), " --table torch --commits 81ab6f7"),
        ("optimization.md", "mnist-epoch-lowrank", "benchmarks/mnist_epoch",
         "mnist_epoch_lbbnn.jsonl", ("runs", "0be5b92", "1357e2f", "10e77dd"),
         " --table runs --commits 0be5b92 1357e2f 10e77dd"),
        ("optimization.md", "mnist-kfac-memory", "benchmarks/mnist_kfac_memory",
         "mnist_kfac_memory.jsonl", (), ""),
        ("optimization.md", "lowrank-step", "benchmarks/lowrank_step", "lowrank_step.jsonl", (),
         ""),
        ("credit_default.md", "credit-part1", "examples/credit_default",
         "credit_default.jsonl", (1,), ""),
        ("credit_default.md", "credit-part2", "examples/credit_default",
         "credit_default.jsonl", (2,), ""),
        ("credit_default.md", "credit-part4", "examples/credit_default",
         "credit_default.jsonl", (4,), ""),
    ],
)  # fmt: skip
def test_benchmark_table_matches_the_benchmark_results(
    monkeypatch, page, tag, script, results, args, flags
):
    # the page's table is the script's report of its results files (reading them needs
    # neither MAPIE nor a fit)
    folder, name = script.split("/")
    module = _benchmark(monkeypatch, name, f"{name}_report", folder)
    paths = [ROOT / "benchmarks" / "results" / r for r in results.split()]
    report = module.report(paths[0] if len(paths) == 1 else paths, *args)
    files = " ".join(f"benchmarks/results/{r}" for r in results.split())
    assert _marked_table(page, tag) == report, (
        f"doc/{page}'s {tag} table differs from {results}; paste (the part of) `python "
        f"{script}.py{flags} --report {files}` between the markers"
    )


_PAIR = "--pair benchmarks/results/"
_R = "benchmarks/results/"


@pytest.mark.parametrize(
    ("page", "tag", "script", "command"),
    [
        ("choosing.md", "chains-ensemble", "defaults",
         f"{_PAIR}auto_mclmc.jsonl:auto@4d52d61 benchmarks/results/auto_mclmc.jsonl:auto@c9a66d7"
         " --labels chains ensemble"),
        ("choosing.md", "chains-nuts-one-noise", "defaults",
         f"{_PAIR}auto_mclmc.jsonl:mclmc8_long "
         "benchmarks/results/defaults_methods.jsonl:default@1342e98,57e4f5c,fa9e79f"
         " --labels chains NUTS"),
        ("choosing.md", "chains-nuts", "defaults",
         f"{_PAIR}auto_mclmc.jsonl:mclmc8_auto "
         "benchmarks/results/defaults_methods.jsonl:default@1342e98,57e4f5c,fa9e79f"
         " --labels chains NUTS"),
        ("choosing.md", "chains-ends", "bde",
         f"--report {_R}auto_mclmc.jsonl --means --data yacht energy"),
        ("choosing.md", "student-t-nuts", "bde",
         f"--report {_R}auto_student_t_nuts.jsonl --pair --label noise_df=5"),
        ("choosing.md", "student-t-ensemble", "bde",
         f"--report {_R}auto_student_t_ensemble.jsonl --pair --label noise_df=5"),
        ("choosing.md", "noise-choice-1616", "bde",
         f"--report {_R}auto_student_t_ensemble.jsonl {_R}auto_noise_choice_uci_1616.jsonl "
         "--pair --label noise_df=5 noise_df=auto"),
        ("choosing.md", "noise-choice-default", "bde",
         f"--report {_R}auto_noise_choice_uci_default.jsonl --pair --label noise_df=5 "
         "noise_df=auto"),
        ("choosing.md", "patience-auto", "bde",
         f"--report {_R}auto_noise_choice_uci_default.jsonl "
         f"{_R}auto_patience_steps_uci_default.jsonl {_R}auto_patience_uci_default.jsonl "
         "--pair --by-commit --label commit=bbe6a80 n_iter_no_change=100 "
         "--baseline-label noise_df=auto+commit=705dbc2"),
        ("choosing.md", "patience-rms", "bde",
         f"--report {_R}auto_patience_steps_rms_swag_uci.jsonl --pair --by-commit "
         "--label rms+commit=bbe6a80-dirty --baseline-label rms"),
        ("choosing.md", "patience-swag", "bde",
         f"--report {_R}auto_patience_steps_rms_swag_uci.jsonl --pair --by-commit "
         "--label swag+commit=bbe6a80-dirty --baseline-label swag"),
        ("choosing.md", "patience-steps", "bde",
         f"--report {_R}auto_patience_steps_uci_default.jsonl {_R}auto_patience_steps_longer.jsonl "
         "--pair --label patience_steps= --data bostonHousing concrete energy yacht "
         "wine-quality-red"),
        ("choosing.md", "patience-steps-diamonds", "bde",
         f"--report {_R}bde_diamonds_default.jsonl {_R}auto_patience_steps_longer.jsonl --pair "
         "--label patience_steps= --baseline-label skbnn:autoactivation=tanh --data diamonds"),
        ("choosing.md", "bde-diamonds-default", "bde",
         f"--report {_R}bde_diamonds_default.jsonl {_R}bde_diamonds.jsonl "
         f"{_R}auto_patience_diamonds_bde_splits.jsonl --means --per-split --label skbnn:auto "
         "n_iter_no_change=100 --metrics test_ll fit_time"),
    ],
)  # fmt: skip
def test_report_command_prints_the_table(monkeypatch, capsys, page, tag, script, command):
    # the page's table is what the command printed above it prints (reading JSON lines,
    # no fit)
    module = _benchmark(monkeypatch, script, f"{script}_command")
    monkeypatch.chdir(ROOT)
    module.main(command.split())
    assert _marked_table(page, tag) == capsys.readouterr().out, (
        f"doc/{page}'s {tag} table differs from its results files; paste `python "
        f"benchmarks/{script}.py {command}` between the markers"
    )


@pytest.mark.parametrize(
    ("tag", "results", "shrunk"),
    [("warmup", "auto_warmup.jsonl", False), ("budget", "auto_budget.jsonl", True)],
)
def test_auto_warmup_tables_match_the_benchmark_results(monkeypatch, tag, results, shrunk):
    # doc/choosing.md's tables of "auto"'s chains by warm-up are benchmarks/auto.py's
    # report of its results files (reading JSON lines, no fit)
    module = _benchmark(monkeypatch, "auto", "auto_benchmark")
    path = ROOT / "benchmarks" / "results" / results
    flag = " --shrunk" if shrunk else ""
    assert _marked_table("choosing.md", tag) == module.report_warmup(path, shrunk), (
        f"doc/choosing.md's {tag} table differs from {results}; paste `python "
        f"benchmarks/auto.py --report-warmup benchmarks/results/{results}{flag}` between "
        "the markers"
    )


_BDE = "--report benchmarks/results/bde.jsonl"


@pytest.mark.parametrize(
    ("tag", "command"),
    [
        ("bde-results", f"{_BDE} --compact"),
        ("bde-modes", f"{_BDE} benchmarks/results/bde_modes.jsonl --paired test_ll"),
        ("bde-modes-discrete",
         f"{_BDE} benchmarks/results/bde_modes.jsonl --paired ll_discrete"),
        ("bde-route", f"{_BDE} --route benchmarks/results/bde_student_t_route.jsonl "
                      "--baseline benchmarks/results/bde_route_api.jsonl"),
        ("bde-times", "--report benchmarks/results/bde_student_t_time.jsonl --times"),
        ("bde-two-stage", f"{_BDE} --route benchmarks/results/bde_two_stage.jsonl"),
        ("bde-diamonds", "--report benchmarks/results/bde_diamonds.jsonl --fits"),
        ("bde-twenty", f"{_BDE} {_R}bde_modes.jsonl --paired test_ll "
         "--label skbnn:auto skbnn:laplace max_tree_depth=8"),
        ("bde-depth8-choice", f"{_BDE} {_R}bde_modes.jsonl --paired test_ll "
         "--label heteroscedastic=True,n_modes=4 max_tree_depth=8 --splits 0-2"),
        ("bde-energy-var", f"{_BDE} {_R}bde_energy_var.jsonl --paired test_ll "
         "--label desired_energy_var"),
        ("bde-energy-var-noise", f"{_BDE} {_R}bde_energy_var.jsonl --paired noise_sd_median "
         "--label desired_energy_var"),
        ("bde-two-stage-ten", f"{_BDE} --route {_R}bde_two_stage.jsonl --splits 0-9"),
        ("bde-two-stage-times", f"--report {_R}bde_two_stage_time.jsonl --times "
         "--label max_tree_depth:8prior"),
        ("bde-shorter-stage", f"{_BDE} --route {_R}bde_two_stage_variants.jsonl "
         f"--label n_warmup:200+fan_in_scaling=False --baseline {_R}bde_two_stage.jsonl"),
        ("bde-stage-64", f"{_BDE} --route {_R}bde_two_stage_variants.jsonl --label n_warmup:300 "
         f"--baseline {_R}bde_two_stage.jsonl"),
        ("bde-depth", f"{_BDE} {_R}bde_two_stage.jsonl {_R}bde_two_stage_variants.jsonl "
         "--paired test_ll --label max_tree_depth:8prior n_warmup:300 max_tree_depth:9"),
        ("bde-depth9-times", f"--report {_R}bde_two_stage_time.jsonl --times "
         "--label n_warmup:100"),
        ("bde-route-api", f"{_BDE} --route {_R}bde_route_api.jsonl --baseline "
         f"{_R}bde_two_stage_variants.jsonl --baseline-label max_tree_depth:9,n_warmup:100"),
        ("bde-route-api-times", f"--report {_R}bde_route_api_time.jsonl --times"),
        ("bde-worst-rows", f"{_BDE} {_R}bde_rows.jsonl --route {_R}bde_two_stage.jsonl --worst "
         "--data energy --splits 1,8,12,16"),
        ("bde-but-worst", f"{_BDE} {_R}bde_rows.jsonl {_R}bde_two_stage.jsonl "
         f"{_R}bde_two_stage_variants.jsonl --paired test_ll_but_worst "
         "--label max_tree_depth:8prior n_warmup:300 max_tree_depth:9"),
        ("bde-homoscedastic", f"{_BDE} --route {_R}bde_route_homoscedastic.jsonl --baseline "
         f"{_R}bde_route_api.jsonl"),
        ("bde-homoscedastic-but-worst", f"{_BDE} {_R}bde_rows.jsonl "
         f"{_R}bde_route_homoscedastic.jsonl {_R}bde_route_api.jsonl --paired "
         "test_ll_but_worst --label init="),
        ("bde-student-t", f"{_BDE} {_R}bde_student_t.jsonl --paired test_ll "
         "--label rescale_units=False"),
        ("bde-student-t-5", f"{_BDE} --route {_R}bde_student_t.jsonl --label noise_df=5, "
         f"--baseline {_R}bde_student_t.jsonl --baseline-label n_warmup=5000,rescale"),
        ("bde-mclmc-t", f"{_BDE} --route {_R}bde_mclmc_t.jsonl"),
        ("bde-mclmc-t32", f"{_BDE} --route {_R}bde_mclmc_t32.jsonl --baseline "
         f"{_R}bde_mclmc_t.jsonl"),
        ("bde-mclmc-t32-times", f"--report {_R}bde_mclmc_t32_time.jsonl --times"),
        ("route-default-model", f"--report {_R}route_default_model.jsonl "
         f"{_R}bde_mclmc_t32.jsonl --pair --label skbnn:mclmc --splits 0-4"),
        ("route-default-model-bde", f"{_BDE} --route {_R}route_default_model.jsonl --label "
         f"fan_in_scaling=False --baseline {_R}bde_mclmc_t32.jsonl --splits 0-4"),
        ("route-default-model-20", f"--report {_R}route_default_model.jsonl --pair --label "
         "activation=tanh+fan_in_scaling=False --baseline-label skbnn:auto --splits 0-19"),
        ("route-default-model-bde-20", f"{_BDE} --route {_R}route_default_model.jsonl "
         f"--label activation=tanh+fan_in_scaling=False --baseline {_R}bde_mclmc_t32.jsonl "
         "--splits 0-19"),
        ("route-wine-floor", f"{_BDE} --route {_R}route_wine_floor.jsonl --baseline "
         f"{_R}route_default_model.jsonl --baseline-label activation=tanh+fan_in_scaling=False "
         "--splits 0-19"),
        ("route-wine-floor-nuts", f"{_BDE} --route {_R}route_wine_floor.jsonl --baseline "
         f"{_R}route_default_model.jsonl --baseline-label skbnn:auto --splits 0-19"),
        ("route-boston-floor", f"{_BDE} --route {_R}route_floor_boston.jsonl --baseline "
         f"{_R}route_default_model.jsonl --baseline-label activation=tanh+fan_in_scaling=False "
         "--splits 0-19"),
        ("bde-wine", f"{_BDE} --fits --label skbnn:auto --data wine-quality-red --splits 0-4 "
         "--metrics test_ll ll_discrete de_stage.ll_discrete ll_jitter rmse"),
    ],
)  # fmt: skip
def test_bde_tables_match_the_benchmark_results(monkeypatch, capsys, tag, command):
    # doc/samplers.md's tables against bde (issue 74's measure) are what benchmarks/bde.py
    # prints of its results files (reading JSON lines: neither bde nor a fit)
    module = _benchmark(monkeypatch, "bde", "bde_benchmark")
    monkeypatch.chdir(ROOT)
    module.main(command.split())
    assert _marked_table("samplers.md", tag) == capsys.readouterr().out, (
        f"doc/samplers.md's {tag} table differs from its results files; paste `python "
        f"benchmarks/bde.py {command}` between the markers"
    )


@pytest.mark.parametrize("name", sorted(_doc_module("figures").BLOCKS))
def test_figures_match_the_benchmark_results(name):
    # the README's measured figures, the docs' compile times and doc/choosing.md's tables of
    # the chains past NUTS's size are doc/figures.py's rendering of benchmarks/results
    # (reading JSON lines, no fit)
    figures = _doc_module("figures")
    page = figures.BLOCKS[name][0]
    documented = figures.current(page.read_text(), name)
    assert documented is not None, f"{page.name} lost its {name} markers"
    assert documented == figures.render(name), (
        f"{page.name}'s {name} block differs from benchmarks/results; regenerate it with "
        "`python doc/figures.py --write`"
    )


def test_figures_read_the_latest_results_line(monkeypatch, tmp_path):
    # a rerun appended to a results file replaces the figures it measured, with its own
    # conditions; copies of the files, so the repository's stay as they are, and nothing
    # asserted of what the repository's files hold today
    figures = _doc_module("figures")
    for name in figures.SOURCES:
        shutil.copy(figures.RESULTS / name, tmp_path / name)
    monkeypatch.setattr(figures, "RESULTS", tmp_path)

    lines = [json.loads(line) for line in open(tmp_path / "compile_time.jsonl")]
    latest = {r["run"] + r.get("method", "") + r.get("estimator", ""): r for r in lines}
    other = latest["summaryhmcregressor"]
    machine = {**latest["coldnutsregressor"]["machine"], "cpu": "AMD EPYC 9R14"}
    rerun = {"date": "2031-01-02", "commit": "abcdef0" * 5 + "12345", "loadavg_1min": 0.4,
             "machine": machine}  # fmt: skip
    newer = [
        {**latest["coldnutsregressor"], **rerun, "compile_time_s": 99.99},
        {**latest["warmnutsregressor"], **rerun},
        {**latest["summarynutsregressor"], **rerun, "cold_compile_time_s": 99.99},
        {**latest["quickstart_cold"], **rerun, "process_s": 7.04},
        {**latest["quickstart_warm"], **rerun, "process_s": 1.96},
    ]
    with open(tmp_path / "compile_time.jsonl", "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in newer)
    kernel = [json.loads(line) for line in open(tmp_path / "kernel_speed.jsonl")]
    relu = [r for r in kernel if r.get("activation") == "relu"][-1]
    faster = {**relu, **rerun, "cpu": "AMD EPYC 9R14", "grad_evals_per_s": 150400}
    with open(tmp_path / "kernel_speed.jsonl", "a") as f:
        f.write(json.dumps(faster) + "\n")

    first_fit = figures.render("readme-first-fit")
    assert "-100.0 s per method" in first_fit and "NUTS the slowest" in first_fit
    measured = figures.render("readme-measured")
    assert "| 7.0 s on an empty cache, 2.0 s after | AMD EPYC 9R14, idle, 2031-01-02 |" in measured
    assert "| 150k gradients per second | AMD EPYC 9R14, idle, 2031-01-02 |" in measured
    table = figures.render("performance-compile-table")
    # the table now joins two runs, and says which row is from which
    assert "| nuts | regressor | 100.0 s (" in table and "| run |" in table
    assert "2031-01-02, abcdef0" in table
    assert f"{other['date']}, {other['commit'][:7]}" in table
    quickstart = " ".join(figures.render("defaults-quickstart").split())
    assert "7.0 s on an empty numba cache and 2.0 s warm" in quickstart


#: Tables typed by hand, by page and the start of their header row. Reference tables
#: (what a module, call or plot is) hold no measurement. The others hold measurements no
#: one report can select, each checked by hand against the files it names, or none
#: kept: the reason is given.
HAND_TYPED = {
    ("architecture.md", "| module | role |"): "reference",
    ("choosing.md", "| you have, or need | pick | why |"): "reference",
    ("onnx.md", "| estimator | outputs | equal to |"): "reference",
    ("optimization.md", "| name | class | what each member does |"): "reference",
    ("user_guide.md", "| function | scores |"): "reference",
    ("user_guide.md", "| display | what it shows |"): "reference",
    ("README.md", "| you have, or need | pick |"): "reference",
    ("README.md", "| call | returns |"): "reference",
    ("performance.md", "| claim | figure | section |"): "rendered cell by cell (doc/figures.py)",
    ("performance.md", "| what grows | figure |"): "rendered cell by cell but the "
    "predictions' memory, measured once by tests/test_memory.py",
    ("samplers.md", "| concrete split | bde | NUTS from bde's last draws |"): "a scratch "
    "run, in no results file",
}


def test_every_measured_table_is_rendered_from_its_results():
    # a table outside a rendered block is a reference table or a named exception: a new
    # hand-typed measurement fails here (no fit, no benchmark; reading the pages)
    found = set()
    pages = [ROOT / "README.md", *sorted(DOC.glob("*.md"))]
    for path in pages:
        rendered, fenced, previous = False, False, ""
        for line in path.read_text().splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            if re.search(r"<!-- [\w-]+:start", line):
                rendered = True
            if re.search(r"<!-- [\w-]+:end", line):
                rendered = False
            row = line.strip()
            if row.startswith("|") and not previous.startswith("|") and not (rendered or fenced):
                key = next((k for k in HAND_TYPED if k[0] == path.name and row.startswith(k[1])),
                           None)  # fmt: skip
                assert key, f"{path.name}: a table typed by hand: {row[:70]}"
                found.add(key)
            previous = row
    assert found == set(HAND_TYPED), f"exceptions no longer in the pages: {set(HAND_TYPED) - found}"


def test_methods_table_in_index_matches_the_code():
    # no fit, well under a second
    table = _methods_table()
    documented = table.current((DOC / "user_guide.md").read_text())
    assert documented is not None, "doc/user_guide.md lost its methods-table markers"
    assert documented == table.render(), (
        "doc/user_guide.md's methods table differs from the methods' get_params(); "
        "regenerate it with `python doc/methods_table.py --write`"
    )


# a tiny run cannot converge and says so; only the plumbing is tested here
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_documented_pipeline_pattern_reaches_std_and_interval():
    # doc/user_guide.md, "Predictions": the pattern for predict_std / predict_interval in a
    # Pipeline, and return_std forwarded by Pipeline.predict. Tiny fit: 0.4 s warm.
    rng = np.random.default_rng(0)
    X = rng.normal(loc=5.0, scale=3.0, size=(40, 2)).astype(np.float32)
    y = (np.sin(X[:, 0] / 3.0) + 0.1 * rng.normal(size=40)).astype(np.float32)
    model = skbnn.BayesianMLPRegressor(
        hidden_layer_sizes=(3,),
        method=skbnn.methods.NUTS(n_chains=2, n_warmup=50),
        n_samples=40,
        random_state=0,
    )
    pipe = make_pipeline(StandardScaler(), model).fit(X, y)

    mean, std = pipe.predict(X, return_std=True)
    Xt = pipe[:-1].transform(X)
    mean_direct, std_direct = pipe[-1].predict(Xt, return_std=True)
    np.testing.assert_array_equal(mean, mean_direct)
    np.testing.assert_array_equal(std, std_direct)
    np.testing.assert_array_equal(pipe[-1].predict_std(Xt), std)
    lower, upper = pipe[-1].predict_interval(Xt, coverage=0.9)
    assert lower.shape == upper.shape == mean.shape == (40,)
    assert np.all(lower < mean) and np.all(mean < upper)
    # float32 in, float64 out, as doc/user_guide.md explains
    assert mean.dtype == std.dtype == lower.dtype == np.float64

    # the documented drop-in: the same calls on the pipeline itself
    pipe = skbnn.pipeline.make_pipeline(StandardScaler(), model).fit(X, y)
    Xt = pipe[:-1].transform(X)
    np.testing.assert_array_equal(pipe.predict_interval(X, coverage=0.9)[0],
                                  pipe[-1].predict_interval(Xt, coverage=0.9)[0])  # fmt: skip
    np.testing.assert_array_equal(pipe.predict_std(X, kind="epistemic"),
                                  pipe[-1].predict_std(Xt, kind="epistemic"))  # fmt: skip


def test_documented_two_stage_route_runs_as_written():
    # doc/samplers.md's "mclmc_then_nuts", run as written on a tiny problem: one fit, NUTS
    # from where MCLMC's chains ended (init="mclmc" in its diagnostics), a chain per mode
    text = (DOC / "samplers.md").read_text()
    block = re.search(r"```python\n(from skbnn import MCLMC.*?def mclmc_then_nuts.*?)```",
                      text, flags=re.S)  # fmt: skip
    assert block, "doc/samplers.md lost the mclmc_then_nuts block"
    namespace = {}
    exec(block[1], namespace)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # single chains per mode: the route warns
        reg = namespace["mclmc_then_nuts"](X, y)
    assert type(reg.method_).__name__ == "NUTS" and reg.diagnostics_["init"] == "mclmc"
    assert reg.diagnostics_["init_grad_evals"] > 0
    assert reg.diagnostics_["n_modes"] == 8 and reg.posterior_.thetas.shape[0] == 400
    mean, std = reg.predict(X, return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)


def _paragraphs(text):
    """Blocks of consecutive non-blank lines outside code fences, tables excluded."""
    blocks, block, fenced = [], [], False
    for line in text.splitlines() + [""]:
        if line.lstrip().startswith("```"):
            fenced = not fenced
            line = ""
        if fenced or not line.strip():
            if block and not all(row.lstrip().startswith(("|", "<!--")) for row in block):
                blocks.append(" ".join(block))
            block = []
        else:
            block.append(line)
    return blocks


def test_readme_is_short_and_its_paragraphs_too():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    longest = max(_paragraphs(text), key=lambda p: len(p.split()))
    assert len(longest.split()) <= 150, longest[:80]


def test_readme_commands_are_what_ci_runs():
    readme, ci = (ROOT / "README.md").read_text(), (ROOT / ".ci" / "run").read_text()
    for command in ("pip install .", "python examples/quickstart.py", 'pip install ".[test]"',
                    "pytest -n auto"):  # fmt: skip
        assert command in readme and command in ci, command


def _slug(heading):
    # GitHub's anchors, which the site's MyST (myst_heading_anchors) also makes
    heading = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return heading.replace(" ", "-")


_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", ["README.md", *sorted(p.name for p in DOC.glob("*.md"))])
def test_relative_links_lead_to_a_file_and_heading(page):
    source = ROOT / page if page == "README.md" else DOC / page
    text = re.sub(r"```.*?```", "", source.read_text(), flags=re.S)
    for target in _LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (source.parent / path).resolve() if path else source
        assert linked.exists(), f"{page} links to {target}, which does not exist"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", linked.read_text(), flags=re.M)
            assert anchor in {_slug(h) for h in headings}, f"{page}: no heading #{anchor}"
