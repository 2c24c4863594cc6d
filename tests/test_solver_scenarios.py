"""What `conda install pytorch` resolves to, over a channel rendered from every .ci_support config.

The channel is rendered and written once per session (python -m feedstock solver-check); each test solves
with py-rattler against it.  Set SOLVER_CHECK_FEEDSTOCK to check another checkout.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from feedstock.channel import PYTHONS, Channel, Installed, SolveError
from feedstock.commands import solver_check
from feedstock.paths import REPO

FEEDSTOCK = Path(os.environ.get("SOLVER_CHECK_FEEDSTOCK", REPO))
GPU = {"__cuda": solver_check.CUDA}


@pytest.fixture(scope="session")
def rendered_channel(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Channel, dict[str, list[dict[str, Any]]]]:
    try:
        import feedstock.render  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"render library not available: {exc}")
    if not list((FEEDSTOCK / ".ci_support").glob("*.yaml")):
        pytest.skip(f"no .ci_support configs in {FEEDSTOCK}")
    channel_dir = tmp_path_factory.mktemp("solver") / "channel"
    records = solver_check.build_channel(FEEDSTOCK, channel_dir)
    return Channel(channel_dir), records


@pytest.fixture(scope="session")
def channel(rendered_channel: tuple[Channel, Any]) -> Channel:
    return rendered_channel[0]


@pytest.fixture(scope="session")
def records(rendered_channel: tuple[Any, dict[str, list[dict[str, Any]]]]) -> dict[str, list[dict[str, Any]]]:
    return rendered_channel[1]


def install(
    channel: Channel, *specs: str, platform: str = "linux-64", cuda: bool = False
) -> dict[str, Installed]:
    return channel.solve(specs, platform, GPU if cuda else None)


def builds(env: dict[str, Installed]) -> str:
    """Readable summary for assertion messages."""
    return ", ".join(str(env[n]) for n in solver_check.INTERESTING if n in env)


def assert_same_build(env: dict[str, Installed]) -> None:
    """pytorch's exact libtorch pin is the installed libtorch; the linalg belongs to the same build."""
    pytorch, libtorch = env["pytorch"], env["libtorch"]
    pins = [d for d in pytorch.depends if d.split()[0] == "libtorch" and len(d.split()) == 3]
    assert pins == [f"libtorch {libtorch.version} {libtorch.build}"], builds(env)
    variant = pytorch.build.split("_py")[0]
    assert libtorch.build.startswith(variant + "_h"), builds(env)
    assert pytorch.build.rsplit("_", 1)[1] == libtorch.build.rsplit("_", 1)[1], builds(env)
    if "libtorch-cuda-linalg" in env:
        linalg = env["libtorch-cuda-linalg"]
        assert linalg.build.startswith(variant + "_"), builds(env)
        assert linalg.build.rsplit("_", 1)[1] == libtorch.build.rsplit("_", 1)[1], builds(env)


# -- the main scenarios --------------------------------------------------------------------------


def test_gpu_machine_gets_the_cuda_mkl_magma_build(channel: Channel) -> None:
    env = install(channel, "pytorch", cuda=True)
    assert env["pytorch"].build.startswith("cuda126_mkl_py"), builds(env)
    assert "_magma_" in env["libtorch-cuda-linalg"].build, builds(env)
    assert "libmagma" in env, builds(env)
    assert_same_build(env)


def test_machine_without_gpu_gets_the_cpu_mkl_build(channel: Channel) -> None:
    env = install(channel, "pytorch")
    assert env["pytorch"].build.startswith("cpu_mkl_py"), builds(env)
    assert "libtorch-cuda-linalg" not in env and "libmagma" not in env, builds(env)
    assert_same_build(env)


def test_pytorch_cpu_on_a_gpu_machine_gets_the_cpu_build(channel: Channel) -> None:
    env = install(channel, "pytorch-cpu", cuda=True)
    assert env["pytorch"].build.startswith("cpu_mkl_py"), builds(env)
    assert "pytorch-gpu" not in env


def test_pytorch_gpu_without_cuda_is_unsatisfiable(channel: Channel) -> None:
    with pytest.raises(SolveError, match="__cuda"):
        install(channel, "pytorch-gpu")


def test_nomagma_linalg_on_request_without_libmagma(channel: Channel) -> None:
    env = install(channel, "pytorch", "libtorch-cuda-linalg * *_nomagma_*", cuda=True)
    assert "_nomagma_" in env["libtorch-cuda-linalg"].build, builds(env)
    assert "libmagma" not in env, builds(env)
    assert env["pytorch"].build.startswith("cuda126_mkl_py"), "only the linalg variant changes: " + builds(
        env
    )


def test_nomagma_linalg_and_libmagma_are_unsatisfiable(channel: Channel) -> None:
    with pytest.raises(SolveError):
        install(channel, "libtorch-cuda-linalg * *_nomagma_*", "libmagma", cuda=True)


@pytest.mark.parametrize("cuda", [False, True], ids=["cpu", "gpu"])
def test_nomkl_gets_the_generic_blas_build(channel: Channel, cuda: bool) -> None:
    env = install(channel, "pytorch", "nomkl", cuda=cuda)
    assert env["pytorch"].build.startswith(("cuda126" if cuda else "cpu") + "_generic_py"), builds(env)
    assert env["libblas"].build.endswith("openblas") and "mkl" not in env, builds(env)
    assert_same_build(env)


@pytest.mark.parametrize("py", PYTHONS)
@pytest.mark.parametrize("cuda", [False, True], ids=["cpu", "gpu"])
def test_python_version_picks_the_matching_pytorch(channel: Channel, py: str, cuda: bool) -> None:
    env = install(channel, "pytorch", f"python={py}", cuda=cuda)
    tag = "py" + py.replace(".", "")
    assert f"_{tag}_" in env["pytorch"].build, builds(env)
    assert env["pytorch"].build.startswith("cuda126_mkl" if cuda else "cpu_mkl"), builds(env)
    assert_same_build(env)


@pytest.mark.parametrize("py", PYTHONS)
@pytest.mark.parametrize("meta", ["pytorch-cpu", "pytorch-gpu"])
def test_metapackage_works_with_every_python(channel: Channel, py: str, meta: str) -> None:
    env = install(channel, meta, f"python={py}", cuda=True)
    assert f"_py{py.replace('.', '')}_" in env["pytorch"].build, builds(env)


@pytest.mark.parametrize(
    "specs",
    [
        ("pytorch * cpu_*", "libtorch * cuda*"),
        ("pytorch * cuda*", "libtorch * cpu_*"),
        ("pytorch-cpu", "pytorch-gpu"),
    ],
    ids=["cpu-pytorch-cuda-libtorch", "cuda-pytorch-cpu-libtorch", "both-metapackages"],
)
def test_mixing_cpu_and_cuda_is_unsatisfiable(channel: Channel, specs: tuple[str, ...]) -> None:
    with pytest.raises(SolveError):
        install(channel, *specs, cuda=True)


@pytest.mark.parametrize(("platform", "blas"), [("osx-64", "mkl"), ("osx-arm64", "generic")])
@pytest.mark.parametrize("py", PYTHONS)
def test_osx_resolves_to_the_per_python_build(channel: Channel, platform: str, blas: str, py: str) -> None:
    env = install(channel, "pytorch", f"python={py}", platform=platform)
    tag = "py" + py.replace(".", "")
    assert env["pytorch"].build.startswith(f"cpu_{blas}_{tag}_"), builds(env)
    assert_same_build(env)


@pytest.mark.parametrize(("driver", "variant"), [("13.0", "cuda130"), ("12.6", "cuda126")])
@pytest.mark.parametrize("py", PYTHONS)
def test_aarch64_gets_the_build_of_its_cuda_driver(
    channel: Channel, driver: str, variant: str, py: str
) -> None:
    """linux-aarch64 builds CUDA 12.6 and 13.0 (sbsa): each driver gets the newest build it can run."""
    env = channel.solve(("pytorch", f"python={py}"), "linux-aarch64", {"__cuda": driver})
    tag = "py" + py.replace(".", "")
    assert env["pytorch"].build.startswith(f"{variant}_generic_{tag}_"), builds(env)
    assert env["libtorch-cuda-linalg"].build.startswith(f"{variant}_generic_magma_"), builds(env)
    assert_same_build(env)


@pytest.mark.parametrize("py", PYTHONS)
def test_a_jetson_gets_the_tegra_build_and_never_an_sbsa_one(channel: Channel, py: str) -> None:
    """A Jetson (JetPack 6's CUDA 12.6 driver, conda-forge's tegra arm-variant installed) gets the
    Tegra CUDA 12.9 build; asking it for an SBSA build is unsatisfiable."""
    jetson = {"__cuda": solver_check.TEGRA_CUDA}
    env = channel.solve(("pytorch", f"python={py}", solver_check.TEGRA), "linux-aarch64", jetson)
    assert env["pytorch"].build.startswith(f"cuda129_generic_py{py.replace('.', '')}_"), builds(env)
    assert solver_check.TEGRA in env["pytorch"].depends and env["arm-variant"].build == "tegra", builds(env)
    assert_same_build(env)
    for sbsa in ("cuda126", "cuda130"):
        with pytest.raises(SolveError):
            channel.solve((f"pytorch * {sbsa}_*", solver_check.TEGRA), "linux-aarch64", {"__cuda": "13.0"})


@pytest.mark.parametrize("driver", ["12.6", "12.9", "13.0"])
def test_an_sbsa_server_never_gets_the_tegra_build(channel: Channel, driver: str) -> None:
    """conda-forge's default arm variant is sbsa: whatever its driver, a server gets an SBSA build,
    and the Tegra build together with the sbsa arm-variant is unsatisfiable."""
    env = channel.solve(("pytorch",), "linux-aarch64", {"__cuda": driver})
    assert not env["pytorch"].build.startswith("cuda129"), builds(env)
    assert env["arm-variant"].build == "sbsa", builds(env)
    with pytest.raises(SolveError):
        channel.solve(("pytorch * cuda129_*", "arm-variant * sbsa"), "linux-aarch64", {"__cuda": driver})


def test_every_platform_offers_every_supported_python(records: dict[str, list[dict[str, Any]]]) -> None:
    found = solver_check.pythons_by_platform(records)
    expected = {p: list(PYTHONS) for p in ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64")}
    assert found == expected


def test_build_numbers_prefer_cuda_mkl_magma(records: dict[str, list[dict[str, Any]]]) -> None:
    assert solver_check.preference_problems(records) == []


# -- the whole scenario table (what docs/packages.md shows) --------------------------------------------


def test_scenario_table(rendered_channel: tuple[Channel, dict[str, list[dict[str, Any]]]]) -> None:
    channel, records = rendered_channel
    outcomes = solver_check.run(channel, solver_check.scenarios(records))
    failed = [o for o in outcomes if o.problems]
    assert not failed, "\n" + solver_check.table(failed)
    for outcome in outcomes:
        if outcome.installed and "pytorch" in outcome.installed:
            assert_same_build(outcome.installed)


# -- free-threaded Python (python314t migration) ---------------------------------------------------


def _freethreaded_pytorch(records: dict[str, list[dict[str, Any]]], subdir: str) -> list[dict[str, Any]]:
    return [
        r
        for r in records[subdir]
        if r["name"] == "pytorch"
        and any(d.startswith("python_abi ") and d.endswith("t") for d in r["depends"])
    ]


def test_every_platform_has_a_freethreaded_pytorch_per_variant(
    records: dict[str, list[dict[str, Any]]],
) -> None:
    """Each CPU/CUDA x BLAS variant that builds 3.14 also builds 3.14t (python314t migration)."""
    for subdir in ("linux-64", "linux-aarch64", "osx-64", "osx-arm64", "win-64"):
        variants = {r["build"].split("_py")[0] for r in records[subdir] if r["name"] == "pytorch"}
        freethreaded = {r["build"].split("_py")[0] for r in _freethreaded_pytorch(records, subdir)}
        assert freethreaded == variants, (subdir, sorted(variants - freethreaded))


def test_gil_python_never_gets_the_freethreaded_build(
    channel: Channel, records: dict[str, list[dict[str, Any]]]
) -> None:
    """Same version, same build-string prefix (py314): only python_abi tells them apart."""
    freethreaded = _freethreaded_pytorch(records, "linux-64")
    assert len(freethreaded) == 6, [r["build"] for r in freethreaded]  # cpu, cuda12.6, cuda13.0 x 2 BLAS
    for record in freethreaded:
        exact = f"pytorch =={record['version']} {record['build']}"
        driver = {"__cuda": "13.0"}  # new enough for every CUDA build
        got = channel.solve((exact, "python 3.14.* *_cp314t"), "linux-64", driver)
        assert got["pytorch"].build == record["build"], builds(got)
        with pytest.raises(SolveError):
            channel.solve((exact, "python 3.14.* *_cpython"), "linux-64", driver)
    gil = install(channel, "pytorch", "python=3.14")  # the plain request: the GIL build
    assert gil["python_abi"].build.endswith("_cp314"), builds(gil)


# -- OpenBLAS: only its OpenMP build next to pytorch ------------------------------------------------


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64", "osx-64", "osx-arm64"])
def test_generic_blas_pytorch_refuses_the_pthreads_openblas(channel: Channel, platform: str) -> None:
    """Generic BLAS resolves to OpenBLAS (nomkl). libtorch's parallel regions are OpenMP, and a
    pthreads OpenBLAS called from them prints "OpenBLAS Warning: Detect OpenMP Loop and this
    application may hang": pytorch gets OpenBLAS's OpenMP build, also on Linux, where the pthreads
    build is the default, and refuses the pthreads one (libopenblas and openblas, the headers)."""
    alone = channel.solve(("libblas * *openblas",), platform)
    default = "openmp_" if platform.startswith("osx-") else "pthreads_"
    assert alone["libopenblas"].build.startswith(default), builds(alone)  # the channel's model
    env = channel.solve(("pytorch", "nomkl"), platform)
    assert env["pytorch"].build.split("_")[1] == "generic", builds(env)
    assert env["libopenblas"].build.startswith("openmp_"), env["libopenblas"]
    for name in ("libopenblas", "openblas"):
        assert channel.solve((f"{name} * pthreads_*", "libblas * *openblas"), platform)[name]
        with pytest.raises(SolveError):
            channel.solve(("pytorch", "nomkl", f"{name} * pthreads_*"), platform)


@pytest.mark.parametrize("platform", ["linux-64", "linux-aarch64"])
def test_freethreaded_cuda_pytorch_brings_its_own_triton(channel: Channel, platform: str) -> None:
    """The CUDA cp314t pytorch requires triton as every Linux CUDA build does (triton 3.8.0 has
    cp314t wheels; conda-forge's python314t migration allowlists triton): a GPU machine with the
    free-threaded Python gets the cp314t triton, and the environment solves."""
    env = channel.solve(("pytorch", "python 3.14.* *_cp314t"), platform, {"__cuda": "13.0"})
    assert env["pytorch"].build.startswith("cuda130_"), builds(env)
    assert env["python_abi"].build.endswith("_cp314t"), builds(env)
    assert "triton" in env and env["triton"].build.startswith("py314t_"), env.get("triton")
    assert any(d.startswith("python_abi 3.14.* *_cp314t") for d in env["triton"].depends), env["triton"]
