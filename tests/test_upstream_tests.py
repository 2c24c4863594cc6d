"""The upstream tests of the ``pytorch`` output: ``recipe/upstream_tests.json`` and the recipe's command.

- the data is at least the selection of conda-forge's pytorch-cpu feedstock (its 9 files and the
  inductor file, its commit as provenance), and a planted mistake in it (a skip without a reason, an
  unknown selector key or value, a -k term pytest would not parse, a dropped file of conda-forge's
  feedstock, ...) is refused in one line;
- every config's rendered ``pytorch`` outputs run ``megabuild upstream-tests run`` with their own
  platform, CUDA and BLAS, and the pytest command each Python gets is what the data says,
  recomputed here by a second, independent reading of the JSON;
- the real pytest parses every generated ``-k``/``-m`` expression and deselects what it should.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config
from feedstock.split_check.recipe import read_recipe
from megabuild.errors import MegabuildError
from megabuild.model import PYTORCH
from megabuild.upstream_tests.selection import PackageTestEnv, load_selection, parse_selection, pytest_args

DATA = RECIPE / "upstream_tests.json"
MEGABUILD_PYTHON = read_recipe(REPO).megabuild_python  # meta.yaml, the one place
# What conda-forge's pytorch-cpu feedstock runs: its recipe/meta.yaml at this commit.
# The data must say the same, and run at least these.
CONDA_FORGE_COMMIT = "74dd3d46ff0c3d05053197961386b5a2018cf3d1"
CONDA_FORGE_FILES = [
    "test/test_autograd.py",
    "test/test_autograd_fallback.py",
    "test/test_custom_ops.py",
    "test/test_linalg.py",
    "test/test_mkldnn.py",
    "test/test_modules.py",
    "test/test_nn.py",
    "test/test_torch.py",
    "test/test_xnnpack_integration.py",
]
CONDA_FORGE_INDUCTOR = ["test/inductor/test_torchinductor.py"]
FULL_PYTHONS = {MEGABUILD_PYTHON, "3.14t"}
RUN_COMMAND = "python -m megabuild upstream-tests run"


def raw_data() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


# ---------------------------------------------------------------------------------------------
# The data: conda-forge's selection, and planted mistakes
# ---------------------------------------------------------------------------------------------


def test_the_data_keeps_the_conda_forge_selection_with_its_commit() -> None:
    selection = load_selection(DATA)
    assert selection.conda_forge_commit == CONDA_FORGE_COMMIT
    assert list(selection.conda_forge_files) == CONDA_FORGE_FILES + CONDA_FORGE_INDUCTOR
    assert set(CONDA_FORGE_FILES + CONDA_FORGE_INDUCTOR) <= {f.path for f in selection.files}
    assert selection.timeout_s > 0 and selection.markers == "not hypothesis"
    raw = raw_data()
    # every skip says where it comes from: the comment in conda-forge's feedstock, or null for ours alone
    assert all("conda_forge" in skip for skip in raw["skips"])
    kept = {s["test"] for s in raw["skips"] if s["conda_forge"] is not None}
    dropped = {s["test"] for s in raw["conda_forge_skips_not_kept"]}
    # conda-forge's 114 skip lines name 109 tests; each is kept or listed as not kept
    assert len(kept) + len(dropped) == raw["conda_forge"]["skipped_tests"] == 109
    assert not kept & dropped


def _mutate(change: Any) -> dict[str, Any]:
    data = copy.deepcopy(raw_data())
    change(data)
    return data


def _first_skip(data: dict[str, Any]) -> dict[str, Any]:
    skip: dict[str, Any] = data["skips"][0]
    return skip


PLANTED = {
    "skip without a reason": (
        lambda d: _first_skip(d).pop("reason"),
        r"skips\[0\]: missing key\(s\) \['reason'\]",
    ),
    "skip with an empty reason": (
        lambda d: _first_skip(d).update(reason=" "),
        r"skips\[0\]\.reason: a non-empty",
    ),
    "skip without provenance": (
        lambda d: _first_skip(d).pop("conda_forge"),
        r"missing key\(s\) \['conda_forge'\]",
    ),
    "unknown selector key": (
        lambda d: _first_skip(d).update(when={"os": ["linux"]}),
        r"skips\[0\]\.when: unknown key\(s\) \['os'\]",
    ),
    "unknown platform": (
        lambda d: _first_skip(d).update(when={"platform": ["linux-arm64"]}),
        r"unknown value\(s\) \['linux-arm64'\]",
    ),
    "unknown CUDA version": (lambda d: _first_skip(d).update(when={"cuda": ["11.8"]}), r"\['11.8'\]"),
    "unknown Python": (lambda d: _first_skip(d).update(when={"python": ["3.13t"]}), r"\['3.13t'\]"),
    "BLAS as a bare string": (
        lambda d: _first_skip(d).update(when={"blas": "mkl"}),
        r"when\.blas: a non-empty list",
    ),
    "dangling operator in -k": (lambda d: _first_skip(d).update(test="test_a or"), r"not a pytest -k term"),
    "unbalanced parenthesis": (
        lambda d: _first_skip(d).update(test="(TestNN and test_a"),
        r"not a pytest -k term",
    ),
    "dash in a name": (lambda d: _first_skip(d).update(test="test-a"), r"not a pytest -k term"),
    "skip listed twice": (lambda d: d["skips"].append(copy.deepcopy(d["skips"][0])), r"skips: listed twice"),
    "conda-forge file dropped": (
        lambda d: d.update(files=[f for f in d["files"] if f["path"] != "test/test_linalg.py"]),
        r"missing \['test/test_linalg.py'\]",
    ),
    "inductor dropped": (
        lambda d: d.update(files=[f for f in d["files"] if "inductor" not in f["path"]]),
        r"test_torchinductor",
    ),
    "file outside test/": (lambda d: d["files"][0].update(path="../x.py"), r"under test/"),
    "short conda-forge commit": (lambda d: d["conda_forge"].update(commit="74dd3d46"), r"40-digit"),
    "workers without a default": (lambda d: d["pytest"]["workers"].pop(), r"last entry must match every env"),
    "timeout not a number": (lambda d: d["pytest"].update(timeout_s="1200"), r"timeout_s"),
    "kept and not kept": (
        lambda d: d["conda_forge_skips_not_kept"].append(
            {"test": _first_skip(d)["test"], "conda_forge_selector": "x", "why_not": "y"}
        ),
        r"is in skips too",
    ),
    "a conda-forge skip dropped silently": (
        lambda d: d["skips"].pop(0),
        r"conda-forge's feedstock skips 109 tests, but 90 skips",
    ),
    "a conda-forge skip passed off as ours": (
        lambda d: _first_skip(d).update(conda_forge=None),
        r"account for each",
    ),
    "unknown top-level key": (lambda d: d.update(skip=[]), r"unknown key\(s\) \['skip'\]"),
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_a_planted_mistake_is_refused(name: str) -> None:
    change, message = PLANTED[name]
    parse_selection(raw_data())  # the real data passes
    with pytest.raises(MegabuildError, match=message):
        parse_selection(_mutate(change))


def _cli(*args: str | Path, cwd: Path = RECIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "megabuild", "upstream-tests", *map(str, args)],
        cwd=cwd,
        env={"PYTHONPATH": str(RECIPE), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )


ENV_ARGS = ("--target-platform", "linux-64", "--cuda", "13.0", "--blas", "mkl", "--megabuild-python")


def test_bad_data_or_env_is_one_line_and_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "upstream_tests.json"
    bad.write_text(json.dumps(_mutate(lambda d: _first_skip(d).pop("reason"))), encoding="utf-8")
    for args in (
        ("show", *ENV_ARGS, MEGABUILD_PYTHON, "--python", "3.12", "--data", bad),
        ("show", *ENV_ARGS, MEGABUILD_PYTHON, "--python", "3.12", "--target-platform", "linux-arm64"),
        ("show", *ENV_ARGS, MEGABUILD_PYTHON, "--python", "3.12", "--data", tmp_path / "missing.json"),
    ):
        res = _cli(*args)
        assert res.returncode == 1, res
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("megabuild: error: "), res.stderr
        assert "Traceback" not in res.stderr


# ---------------------------------------------------------------------------------------------
# Every config: the rendered command, and the pytest command each Python gets
# ---------------------------------------------------------------------------------------------


@cache
def pytorch_outputs() -> tuple[RenderedOutput, ...]:
    configs = list_configs(REPO)
    assert configs, ".ci_support has no configs"
    return tuple(o for c in configs for o in render_config(c.path, RECIPE) if o.name == PYTORCH)


def python_of(output: RenderedOutput) -> str:
    """``3.14.* *_cp314t`` -> ``3.14t``; ``3.12.* *_cpython`` -> ``3.12``."""
    spec = output.variant["python"]
    version = ".".join(spec.split(" ")[0].split(".")[:2])
    return version + ("t" if spec.endswith("t") else "")


def run_args(output: RenderedOutput) -> dict[str, str]:
    """The options of the output's one ``upstream-tests run`` command."""
    lines = [c for c in output.test.get("commands", []) if c.startswith(RUN_COMMAND)]
    assert len(lines) == 1, f"{output.dist}: {len(lines)} upstream-tests commands"
    words = shlex.split(lines[0].removeprefix(RUN_COMMAND))
    return dict(zip(words[::2], words[1::2], strict=True))


def oracle(data: dict[str, Any], env: dict[str, str]) -> list[str] | None:
    """A second reading of the JSON, independent of the module: what pytest must get."""

    def hit(when: dict[str, Any]) -> bool:
        cuda = when.get("cuda")
        return (
            env["platform"] in when.get("platform", [env["platform"]])
            and env["blas"] in when.get("blas", [env["blas"]])
            and env["python"] in when.get("python", [env["python"]])
            and (
                cuda is None
                or (cuda == (env["cuda"] != "None") if isinstance(cuda, bool) else env["cuda"] in cuda)
            )
        )

    if env["python"] not in {
        env["megabuild"] if p == "megabuild" else p for p in data["full_pythons"]["pythons"]
    }:
        return None
    workers = next(w["value"] for w in data["pytest"]["workers"] if hit(w["when"]))
    args = ["-n", str(workers), *[f["path"] for f in data["files"] if hit(f["when"])]]
    terms = [s["test"] for s in data["skips"] if hit(s["when"])]
    if terms:
        args += ["-k", "not (" + " or ".join(f"({t})" for t in terms) + ")"]
    pyt = data["pytest"]
    return [*args, "-m", pyt["markers"], f"--timeout={pyt['timeout_s']}", *pyt["extra_args"]]


def test_every_config_runs_the_data_on_the_megabuild_python_and_314t() -> None:
    data = raw_data()
    selection = load_selection(DATA)
    full: dict[str, set[str]] = {}
    for output in pytorch_outputs():
        args = run_args(output)
        assert args == {
            "--target-platform": output.subdir,
            "--cuda": output.variant["cuda_compiler_version"],
            "--blas": output.variant["blas_impl"],
            "--megabuild-python": MEGABUILD_PYTHON,
        }, output.dist
        assert {"megabuild/", "upstream_tests.json"} <= set(output.test["files"]), output.dist
        assert "test" in output.test["source_files"], output.dist
        requires = {r.split()[0] for r in output.test["requires"]}
        assert {"pytest", "pytest-xdist", "pytest-timeout"} <= requires, output.dist
        python = python_of(output)
        env = PackageTestEnv(
            args["--target-platform"], args["--cuda"], args["--blas"], python, MEGABUILD_PYTHON
        )
        plain = {"platform": env.platform, "cuda": env.cuda, "blas": env.blas, "python": python}
        expected = oracle(data, {**plain, "megabuild": MEGABUILD_PYTHON})
        assert pytest_args(selection, env) == expected, output.dist
        if expected is not None:
            full.setdefault(output.config, set()).add(python)
            assert set(CONDA_FORGE_FILES) <= set(expected), output.dist
    assert full and all(pythons == FULL_PYTHONS for pythons in full.values()), full
    assert len(full) == len(list_configs(REPO))


def test_inductor_and_skips_follow_their_selectors() -> None:
    """Spot checks a reader can verify against the JSON by eye (the oracle covers the rest)."""
    selection = load_selection(DATA)

    def args(platform: str, cuda: str, blas: str, python: str = MEGABUILD_PYTHON) -> list[str]:
        got = pytest_args(selection, PackageTestEnv(platform, cuda, blas, python, MEGABUILD_PYTHON))
        assert got is not None
        return got

    assert CONDA_FORGE_INDUCTOR[0] in args("linux-64", "13.0", "mkl")
    assert CONDA_FORGE_INDUCTOR[0] not in args("linux-aarch64", "None", "generic")
    assert CONDA_FORGE_INDUCTOR[0] not in args("osx-arm64", "None", "generic", "3.14t")
    assert args("linux-64", "13.0", "mkl")[:2] == ["-n", "1"]
    assert args("linux-64", "None", "mkl")[:2] == ["-n", "2"]
    aarch64 = args("linux-aarch64", "None", "generic")
    assert "(_cpu_float16 and test_addmm)" in aarch64[aarch64.index("-k") + 1]
    linux = args("linux-64", "None", "generic")
    assert "test_addmm" not in linux[linux.index("-k") + 1]
    assert "(test_complex_python_literal_backward_cpu)" in linux[linux.index("-k") + 1]
    ft = args("linux-64", "None", "generic", "3.14t")
    assert "test_complex_python_literal_backward_cpu" not in ft[ft.index("-k") + 1]
    assert pytest_args(selection, PackageTestEnv("linux-64", "None", "mkl", "3.13", MEGABUILD_PYTHON)) is None


# ---------------------------------------------------------------------------------------------
# The real pytest: every generated expression parses and deselects what it should
# ---------------------------------------------------------------------------------------------

PROBE = """
class TestTorch:
    def test_print(self):
        pass

    def test_tensor_keep(self):
        pass


def test_norm_matrix_degenerate_shapes():
    pass


def test_keep_me():
    pass
"""


# One interpreter for every expression (a pytest start per expression costs seconds): the real
# pytest.main collects the probe with each -k/-m and reports the exit code and what it kept.
COLLECT_EACH = """
import json, sys
import pytest

class Kept:
    def pytest_collection_finish(self, session):
        self.ids = [item.nodeid for item in session.items]

out = []
for k, m in json.load(open(sys.argv[1])):
    kept = Kept()
    kept.ids = []
    opts = ["--collect-only", "-q", "-p", "no:cacheprovider", "-c", "pytest.ini", "-k", k, "-m", m]
    code = pytest.main([*opts, "test_probe.py"], plugins=[kept])
    out.append([int(code), kept.ids])
json.dump(out, open(sys.argv[2], "w"))
"""


def _collect(tmp_path: Path, expressions: list[tuple[str, str]]) -> list[tuple[int, set[str]]]:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_probe.py").write_text(PROBE, encoding="utf-8")
    (tmp_path / "in.json").write_text(json.dumps(expressions), encoding="utf-8")
    res = subprocess.run(
        [sys.executable, "-c", COLLECT_EACH, "in.json", "out.json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    found = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    return [(code, {i.removeprefix("test_probe.py::") for i in ids}) for code, ids in found]


def test_real_pytest_parses_every_generated_expression(tmp_path: Path) -> None:
    expressions = set()
    for output in pytorch_outputs():
        args = run_args(output)
        env = PackageTestEnv(
            args["--target-platform"], args["--cuda"], args["--blas"], python_of(output), MEGABUILD_PYTHON
        )
        got = pytest_args(load_selection(DATA), env)
        if got is not None:
            expressions.add((got[got.index("-k") + 1], got[got.index("-m") + 1]))
    assert expressions
    # the check can fail: pytest refuses a broken expression (exit 4, usage error)
    broken = ("not ((test_a or))", "not hypothesis")
    *results, refused = _collect(tmp_path, [*sorted(expressions), broken])
    assert refused[0] == 4
    for (k, _m), (code, kept) in zip(sorted(expressions), results, strict=True):
        assert code == 0, k
        assert kept == {"TestTorch::test_tensor_keep", "test_keep_me"}, (k, kept)


# ---------------------------------------------------------------------------------------------
# ``run``: the command as the test phase calls it
# ---------------------------------------------------------------------------------------------


def test_run_on_a_smoke_python_runs_nothing(tmp_path: Path) -> None:
    other = "3.10" if sys.version_info[:2] != (3, 10) else "3.11"
    res = _cli("run", *ENV_ARGS, other, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "smoke checks only" in res.stdout


def test_run_on_a_full_python_needs_the_upstream_test_tree(tmp_path: Path) -> None:
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    res = _cli("run", *ENV_ARGS, this, cwd=tmp_path)
    assert res.returncode == 1 and "upstream test files missing" in res.stderr, res


REQUIRE_PLUGINS_ENV = "FEEDSTOCK_REQUIRE_PYTEST_PLUGINS"


def _plugins_or_skip() -> None:
    """pytest-xdist and pytest-timeout, which the recipe's test env installs, in this interpreter."""
    missing = [name for name in ("xdist", "pytest_timeout") if importlib.util.find_spec(name) is None]
    if not missing:
        return
    reason = f"{missing} not importable (pip install pytest-xdist pytest-timeout)"
    if os.environ.get(REQUIRE_PLUGINS_ENV, "") not in ("", "0"):
        pytest.fail(f"{REQUIRE_PLUGINS_ENV} is set but {reason}", pytrace=False)
    pytest.skip(reason)


UPSTREAM_STAND_IN = """
import os


class TestTorch:
    def test_print(self):
        raise AssertionError("the data skips this test")

    def test_threads(self):
        assert os.environ["OMP_NUM_THREADS"] == "4"


def test_keep():
    pass
"""


def test_run_executes_the_command_with_xdist_and_timeout(tmp_path: Path) -> None:
    """``run`` as the test phase calls it, on stand-ins at the data's paths: the real pytest with
    pytest-xdist and pytest-timeout takes the generated options, the skips deselect, and a skip
    taken out of the data makes the run fail."""
    _plugins_or_skip()
    this = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for path in load_selection(DATA).files_for(PackageTestEnv("linux-64", "13.0", "mkl", this, this)):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(UPSTREAM_STAND_IN, encoding="utf-8")
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    env_args = [*ENV_ARGS, this]
    res = _run_with_this_python(tmp_path, "run", *env_args)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    assert "upstream-tests: OMP_NUM_THREADS=4" in res.stdout and "-n 1" in res.stdout
    # 10 files: test_threads and test_keep pass in each, every test_print is deselected
    assert re.search(r"= 20 passed in ", res.stdout), res.stdout[-2000:]
    bad = tmp_path / "bad.json"
    data = _mutate(
        lambda d: d.update(skips=[s for s in d["skips"] if s["test"] != "TestTorch and test_print"])
    )
    data["conda_forge"]["skipped_tests"] -= 1
    bad.write_text(json.dumps(data), encoding="utf-8")
    res = _run_with_this_python(tmp_path, "run", *env_args, "--data", bad)
    assert res.returncode == 1 and "10 failed" in res.stdout, res.stdout[-2000:]


def _run_with_this_python(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "megabuild", "upstream-tests", *map(str, args)],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(RECIPE)},
        capture_output=True,
        text=True,
        check=False,
    )
