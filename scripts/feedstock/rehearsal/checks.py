"""What runs in the rehearsal's environment: the rendered ``test:`` sections, the binary checks
and a short smoke test; each one line in the report, and nothing skipped without its reason."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..paths import RECIPE, TESTS
from ..test_commands import fresh_test_dir, run_command

# The rehearsal packs upstream's binaries, not ours: what they take from outside a conda
# environment (RUNPATH $ORIGIN/../../nvidia/..., the bundled libgomp, ...) is explained once, as
# data, for the rendered check-binaries commands here and tests/test_binary_check_wheels.py.
UPSTREAM_EXPLAINED = TESTS / "data" / "binary-check-upstream-wheels.json"
UPSTREAM_TEST_RUNNER = "megabuild upstream-tests run"  # reads the source_files' test/

TIMEOUT = 1800.0
UPSTREAM_TESTS = (
    "upstream's test files are not here (source_files: test; PyTorch sources newer than 2.6.0 are "
    "not available on this machine)"
)


@dataclass(frozen=True)
class Outcome:
    what: str
    ok: bool | None  # None: not run (the note says why)
    seconds: float
    note: str = ""

    def line(self) -> str:
        status = "SKIP" if self.ok is None else "ok  " if self.ok else "FAIL"
        note = f" ({self.note})" if self.note else ""
        return f"{status} {self.seconds:6.1f}s  {self.what}{note}"


def run_shell(what: str, command: str, env: Mapping[str, str], cwd: Path) -> Outcome:
    """One command through the rendered tests' runner (``bash -euo pipefail``), as one line."""
    ran = run_command(
        command, env, cwd, explained=UPSTREAM_EXPLAINED, bash_options=("-euo", "pipefail"), timeout=TIMEOUT
    )
    return Outcome(what, ran.returncode == 0, ran.seconds, ran.tail() if ran.returncode != 0 else "")


def needs_upstream_sources(command: str, test: Mapping[str, Any]) -> bool:
    """A command that reads the test section's ``source_files`` (upstream's ``test/``)."""
    sources = [str(s).rstrip("/") for s in test.get("source_files") or []]
    return UPSTREAM_TEST_RUNNER in command or any(f" {src}/" in f" {command}" for src in sources)


def rendered_tests(name: str, test: Mapping[str, Any], env: Mapping[str, str], work: Path) -> list[Outcome]:
    """Every command of one output's rendered ``test:`` section, in a fresh dir holding its
    ``files`` (as conda-build's test dir does); ``imports`` first."""
    where = fresh_test_dir(work / f"test-{name}", test, RECIPE)
    outcomes = [
        run_shell(f"{name}: import {module}", f'python -c "import {module}"', env, where)
        for module in test.get("imports") or []
    ]
    for command in test.get("commands") or []:
        what = f"{name}: {command}"
        if needs_upstream_sources(str(command), test):
            outcomes.append(Outcome(what, None, 0.0, UPSTREAM_TESTS))
            continue
        outcomes.append(run_shell(what, str(command), env, where))
    return outcomes


SMOKE = r"""
import json, os, sys, tempfile, time


def _child(t):
    t.add_(1)


def main():
    results = {}
    def check(name):
        def wrap(fn):
            t0 = time.monotonic()
            try:
                fn(); results[name] = [True, round(time.monotonic() - t0, 1), ""]
            except Exception as exc:
                results[name] = [False, round(time.monotonic() - t0, 1), f"{type(exc).__name__}: {exc}"[:300]]
        return wrap
    import torch

    @check("tensor ops")
    def _():
        a = torch.arange(12.0).reshape(3, 4); assert (a @ a.T).shape == (3, 3)
        assert torch.linalg.solve(torch.eye(3) * 2, torch.ones(3)).allclose(torch.full((3,), 0.5))
        assert torch.nn.functional.conv2d(torch.ones(1, 1, 4, 4), torch.ones(1, 1, 3, 3)).sum() == 36

    @check("autograd")
    def _():
        x = torch.tensor([2.0, 3.0], requires_grad=True); (x ** 2).sum().backward()
        assert x.grad.tolist() == [4.0, 6.0]

    @check("torch.compile")
    def _():
        f = torch.compile(lambda x: torch.sin(x) + torch.cos(x) * 2)
        x = torch.randn(64); assert torch.allclose(f(x), torch.sin(x) + torch.cos(x) * 2, atol=1e-5)

    @check("cpp_extension.load_inline")
    def _():
        from torch.utils import cpp_extension
        src = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"
        mod = cpp_extension.load_inline("rehearsal_ext", cpp_sources=src, functions=["twice"],
                                        build_directory=tempfile.mkdtemp(), verbose=False)
        assert mod.twice(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]

    @check("AOTInductor")
    def _():
        class M(torch.nn.Module):
            def forward(self, x): return torch.relu(x) * 3
        ep = torch.export.export(M(), (torch.randn(8),))
        pt2 = os.path.join(tempfile.mkdtemp(), "m.pt2")
        path = torch._inductor.aoti_compile_and_package(ep, package_path=pt2)
        runner = torch._inductor.aoti_load_package(path)
        x = torch.randn(8); assert torch.allclose(runner(x), torch.relu(x) * 3)

    @check("shared memory between processes")
    def _():
        import torch.multiprocessing as mp
        t = torch.zeros(4).share_memory_()
        p = mp.get_context("spawn").Process(target=_child, args=(t,)); p.start(); p.join(60)
        assert p.exitcode == 0 and t.tolist() == [1.0] * 4, (p.exitcode, t.tolist())

    @check("torch.cuda without a GPU")
    def _():
        assert torch.backends.cuda.is_built() and torch.version.cuda
        results["cuda"] = [torch.cuda.is_available(), 0.0, torch.version.cuda]

    print(json.dumps(results))


if __name__ == "__main__":
    main()
"""


def smoke_test(python: Path, env: Mapping[str, str], work: Path) -> dict[str, list[Any]]:
    """The smoke test in an interpreter; name -> [ok, seconds, error]."""
    import json

    script = work / "rehearsal_smoke.py"
    script.write_text(SMOKE, encoding="utf-8")
    proc = subprocess.run(
        [str(python), str(script)],
        cwd=work,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    try:
        data: dict[str, list[Any]] = json.loads(lines[-1]) if lines else {}
    except ValueError:
        data = {}
    if not data:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])[:400]
        data = {"import torch": [False, 0.0, tail or f"exit {proc.returncode}"]}
    return data
