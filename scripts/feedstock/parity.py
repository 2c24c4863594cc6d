"""docs/packages.md's table of what changes for users of conda-forge's current pytorch packages.

The conda-forge column is a record of conda-forge/pytorch-cpu-feedstock at 74dd3d46 (2.13.0; its
``.ci_support`` files, ``recipe/build.sh``, ``bld.bat`` and ``meta.yaml``): :data:`CONDA_FORGE`.
The column of this feedstock is computed wherever code answers it: configs, CUDA versions and
BLAS from the committed ``.ci_support`` files, architectures and switches from
``megabuild.buildenv`` (what ``megabuild env`` exports). The other rows are prose in
:data:`PROSE_ROWS`. ``scripts/feedstock/doc_tables.py`` renders the table into the doc.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from megabuild import model
from megabuild.buildenv import cuda_arch_list, switches
from megabuild.buildenv.target import BuildTarget

from feedstock.configs import Config, list_configs
from feedstock.paths import REPO

CONDA_FORGE_COMMIT = "74dd3d46"


@dataclass(frozen=True)
class Recorded:
    """conda-forge's value of a row, and why this feedstock differs (or "same")."""

    conda_forge: str
    why: str


# per platform: CUDA versions (the .ci_support names) and BLAS
CONDA_FORGE = {
    "configs linux-64": Recorded("CPU, 12.9, 13.0; mkl, generic", "CUDA 12.6 as upstream's cu126 wheels"),
    "configs linux-aarch64": Recorded(
        "CPU, 12.9, 13.0 (sbsa); tegra 12.9; generic",
        "sbsa: CUDA 12.6 as upstream's cu126 wheels; tegra as conda-forge",
    ),
    "configs osx-64": Recorded("CPU; mkl, generic", "same"),
    "configs osx-arm64": Recorded("CPU; generic", "same"),
    "configs win-64": Recorded("CPU, 12.8, 13.0; mkl", "12.9: the pinning's CUDA 12"),
    "archs linux-64": Recorded(
        "12.9: `5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX`; 13.0: `7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX`",
        "upstream's wheel lists (+PTX on the last); Blackwell (10.0, 12.0) needs the 13.0 build here",
    ),
    "archs linux-aarch64": Recorded(
        "12.9: `5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX`; 13.0: `7.5;8.0;8.6;8.7;9.0;10.0;11.0;12.0+PTX`;"
        " tegra: `8.7+PTX`",
        "upstream's aarch64 lists; 8.7 (Orin) on 13.0 and tegra as conda-forge; no Blackwell on 12.6",
    ),
    "archs win-64": Recorded(
        "12.8: `5.0;6.0;7.0;7.5;8.0;8.6;9.0;10.0;12.0+PTX`; 13.0: `7.5;8.0;8.6;9.0;10.0;11.0;12.0+PTX`",
        "upstream's lists",
    ),
    "BLAS": Recorded(
        "mkl: `MKL`; generic: `OpenBLAS` (`OpenBLAS_HOME=$PREFIX`)",
        "`Generic` links the netlib-named libblas/libcblas (patch 0005), switchable at install time",
    ),
    "USE_CUFILE": Recorded("1 (Linux CUDA)", "same; no libcufile on Windows"),
    "USE_XNNPACK": Recorded("upstream default (on)", "off on x86_64 as upstream's wheels"),
    "USE_SYSTEM_FMT": Recorded(
        "1 (patches 0012/0013: kineto against conda's fmt)",
        "bundled, as upstream's wheels: header-only inside libtorch, no shared fmt ABI; no patches to carry",
    ),
    "USE_MAGMA": Recorded("1 (CUDA)", "Linux: libtorch without, the linalg split below adds it"),
}
"""conda-forge's facts at :data:`CONDA_FORGE_COMMIT`, keyed by row."""

SWITCHES = {"USE_CUFILE": True, "USE_XNNPACK": False, "USE_SYSTEM_FMT": False, "USE_MAGMA": True}
"""The switches whose row this feedstock's column computes from ``megabuild env``; True: only the
CUDA configs' values count (a CPU build does not set them)."""

PROSE_ROWS: tuple[tuple[str, str, str, str], ...] = (
    (
        "Pythons",
        "3.10–3.14, one job per config",
        "3.10–3.14 and 3.14t, every Python in the config's one job",
        "free-threaded users get a pytorch too",
    ),
    (
        "`libtorch-cuda-linalg`",
        "none since 8d46cc96: MAGMA always linked",
        "Linux CUDA: `magma` (build +50, picked by default) / `nomagma`; "
        "`conda install 'libtorch-cuda-linalg=*=*nomagma*'` switches",
        "~385 MB less without MAGMA",
    ),
    ("metapackages", "`pytorch-cpu` / `pytorch-gpu`", "same, and they exclude each other", "same"),
    (
        "build strings",
        "`cuda129_mkl_py312_hHASH_302`",
        "same pattern; linalg adds `_magma_`/`_nomagma_`",
        "same",
    ),
    (
        "tests",
        "`pytorch-tests` output: upstream test files on every Python (aarch64: 3.12), inductor on 3.12",
        "upstream tests on 3.12 and 3.14t, smoke checks on every Python, binary checks of every package",
        "all Pythons share one job's time",
    ),
    ("`CF_TORCH_CUDA_ARCH_LIST`", "set by the CUDA libtorch's activation", "same", "same"),
    ("tegra (linux-aarch64)", "CUDA 12.9, `8.7+PTX`", "same as conda-forge", "same"),
    ("release candidates", "`channel_targets: conda-forge pytorch_rc`", "same as conda-forge", "same"),
)
"""Rows no code of this feedstock answers: (what, conda-forge, this feedstock, why)."""


def build_targets(configs: Iterable[Config]) -> list[BuildTarget]:
    """Every (platform, CUDA, BLAS, arm variant) the configs build, as ``megabuild env`` takes it."""
    targets = []
    for c in configs:
        cudas = c.get("cuda_compiler_version") or ["None"]
        no_arm: list[str | None] = [None] * len(cudas)
        arms: list[str | None] = list(c.get(model.ARM_VARIANT_KEY) or no_arm)
        for cuda, arm in zip(cudas, arms):
            for blas in c.get("blas_impl") or [model.GENERIC_BLAS]:
                cuda_or_none = None if cuda == "None" else cuda
                targets.append(BuildTarget(c.subdir, c.subdir, cuda_or_none, blas, arm_variant=arm))
    return targets


def _label(target: BuildTarget) -> str:
    """A CUDA version, with the arm variant where it is not the platform's default (tegra)."""
    assert target.cuda is not None
    default = model.platform(target.target_platform).arm_variants[:1]
    named = target.arm_variant is not None and target.arm_variant not in [v.name for v in default]
    return f"{target.cuda} ({target.arm_variant})" if named else target.cuda


def _cudas(targets: Iterable[BuildTarget]) -> list[BuildTarget]:
    """One target per CUDA label, oldest CUDA first."""
    by_label = {_label(t): t for t in targets if t.cuda is not None}
    return sorted(by_label.values(), key=lambda t: ([int(p) for p in (t.cuda or "0").split(".")], _label(t)))


def _config_cell(targets: Sequence[BuildTarget]) -> str:
    kinds = (["CPU"] if any(t.cuda is None for t in targets) else []) + [_label(t) for t in _cudas(targets)]
    blas = sorted({t.blas_impl for t in targets}, key=list(model.BLAS_IMPLS).index)
    return f"{', '.join(kinds)}; {', '.join(blas)}"


def _arch_cell(platform: str, targets: Sequence[BuildTarget]) -> str:
    return "; ".join(
        f"{_label(t)}: `{cuda_arch_list(t.cuda or '', platform, t.arm_variant)}`" for t in _cudas(targets)
    )


def _values_cell(name: str, targets: Sequence[BuildTarget]) -> str:
    """``value: where`` for each value ``megabuild env`` gives ``name`` ("unset" when it exports
    none); a platform is named alone when the value holds for all its ``targets``."""
    where: dict[str, list[str]] = {}
    for platform in dict.fromkeys(t.target_platform for t in targets):
        mine = [t for t in targets if t.target_platform == platform]
        values = {t: switches(t).get(name, "unset") for t in mine}
        for target, value in values.items():
            label = (
                platform
                if len(set(values.values())) == 1
                else f"{platform} {'CUDA' if target.cuda else 'CPU'}"
            )
            if label not in where.setdefault(value, []):
                where[value].append(label)
    if len(where) == 1:
        return f"{next(iter(where))} everywhere"
    return "; ".join(f"{value}: {', '.join(labels)}" for value, labels in where.items())


def rows(configs: Sequence[Config] | None = None) -> list[tuple[str, str, str, str]]:
    """(what, conda-forge, this feedstock, why) for every row of the table."""
    targets = build_targets(configs if configs is not None else list_configs(REPO))
    by_platform: dict[str, list[BuildTarget]] = {}
    for t in targets:
        by_platform.setdefault(t.target_platform, []).append(t)
    out = []
    for platform, mine in by_platform.items():
        fact = CONDA_FORGE[f"configs {platform}"]
        out.append((f"{platform}: CUDA, BLAS", fact.conda_forge, _config_cell(mine), fact.why))
    for platform, mine in by_platform.items():
        if _cudas(mine):
            fact = CONDA_FORGE[f"archs {platform}"]
            out.append((f"{platform}: architectures", fact.conda_forge, _arch_cell(platform, mine), fact.why))
    fact = CONDA_FORGE["BLAS"]
    blas = {t.blas_impl: switches(t)["BLAS"] for t in targets}
    out.append(("`BLAS`", fact.conda_forge, "; ".join(f"{k}: `{v}`" for k, v in blas.items()), fact.why))
    for name, cuda_only in SWITCHES.items():
        fact = CONDA_FORGE[name]
        scope = [t for t in targets if t.cuda or not cuda_only]
        out.append((f"`{name}`", fact.conda_forge, _values_cell(name, scope), fact.why))
    return out + list(PROSE_ROWS)
