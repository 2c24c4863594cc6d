"""What the build environment is a function of, resolved once from conda-build's environment.

conda-build exports the variant's keys (``target_platform``, ``cuda_compiler_version``,
``blas_impl``; ``build_platform`` where a cross build sets it; ``arm_variant_type`` on
linux-aarch64) to a build script that uses them,
and ``CPU_COUNT``/``CI`` where the recipe's ``script_env`` passes them. Unknown values are an
error here, before any build step runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from megabuild import model
from megabuild.errors import MegabuildError

PLATFORMS = tuple(facts.subdir for facts in model.PLATFORMS)
"""The platforms and their BLAS choices are the model's (megabuild.model.PlatformFacts)."""
NO_CUDA = "None"
"""conda-build's ``cuda_compiler_version`` of a CPU config."""
DEFAULT_CPU_COUNT = 2
"""conda-build sets ``CPU_COUNT``; a caller without it (a test, a manual run) gets this many jobs."""

VARIANT_KEYS = (
    "target_platform", "build_platform", "cuda_compiler_version", "blas_impl", model.ARM_VARIANT_KEY,
)  # fmt: skip
"""The variant keys this package reads from the environment. conda-build counts a key as used by
an output (its hash, the CI jobs) only where the output's script names it
(``tests/test_render_used_vars.py`` checks that build.sh and bld.bat do)."""


@dataclass(frozen=True)
class BuildTarget:
    """The configuration being built (one CI job), with the machine's compile-job budget."""

    target_platform: str
    build_platform: str
    cuda: str | None  # "12.6", "13.0", ...; None for a CPU build
    blas_impl: str
    cpu_count: int = DEFAULT_CPU_COUNT
    ci: str = ""  # conda-forge's CI sets CI=github_actions
    # linux-aarch64: conda-forge's arm_variant_type ("sbsa", "tegra"); None where the platform has none
    arm_variant: str | None = None

    def __post_init__(self) -> None:
        for name, platform in (
            ("target_platform", self.target_platform),
            ("build_platform", self.build_platform),
        ):
            if platform not in PLATFORMS:
                raise MegabuildError(f"env: unsupported {name} {platform!r} (known: {', '.join(PLATFORMS)})")
        blas = model.platform(self.target_platform).blas_impls
        if self.blas_impl not in blas:
            raise MegabuildError(
                f"env: unsupported blas_impl {self.blas_impl!r} on {self.target_platform}"
                f" (known: {', '.join(blas)})"
            )
        self._check_arm_variant()
        if self.cpu_count < 1:
            raise MegabuildError(f"env: CPU_COUNT must be a positive number, got {self.cpu_count}")

    def _check_arm_variant(self) -> None:
        variants = model.platform(self.target_platform).arm_variants
        if self.arm_variant is None:
            if variants:
                raise MegabuildError(f"env: {model.ARM_VARIANT_KEY} is not set for {self.target_platform}")
            return
        if not variants:
            raise MegabuildError(f"env: {self.target_platform} has no {model.ARM_VARIANT_KEY}")
        names = [v.name for v in variants]
        if self.arm_variant not in names:
            raise MegabuildError(
                f"env: {model.ARM_VARIANT_KEY} {self.arm_variant!r} is not one the feedstock builds"
                f" ({', '.join(names)})"
            )
        variant = model.arm_variant(self.arm_variant)
        if variant.cuda_versions and self.cuda not in variant.cuda_versions:
            raise MegabuildError(
                f"env: the {variant.name} arm variant builds CUDA {', '.join(variant.cuda_versions)} only,"
                f" not {self.cuda or NO_CUDA}"
            )

    @property
    def is_windows(self) -> bool:
        return self.target_platform.startswith("win-")

    @property
    def is_cross(self) -> bool:
        return self.target_platform != self.build_platform


@dataclass(frozen=True)
class Locations:
    """Where the build happens: conda-build's paths, the version, and what the compiler activation
    already exported (``CMAKE_ARGS``, ``CMAKE_LIBRARY_PATH``), which the environment extends."""

    prefix: str
    build_prefix: str
    src_dir: str
    pkg_version: str
    cmake_args: str = ""
    cmake_library_path: str = ""
    library_prefix: str = ""  # Windows: %PREFIX%\Library and its bin/lib/include
    library_inc: str = ""
    library_lib: str = ""


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise MegabuildError(f"env: {name} is not set (run inside conda-build's build environment)")
    return value


def _cpu_count(env: Mapping[str, str]) -> int:
    value = env.get("CPU_COUNT", "")
    if not value:
        return DEFAULT_CPU_COUNT
    try:
        return int(value)
    except ValueError:
        raise MegabuildError(f"env: CPU_COUNT must be a number, got {value!r}") from None


def target_from_environment(env: Mapping[str, str]) -> BuildTarget:
    """The target as conda-build's environment names it; a missing or unknown value is an error."""
    target_platform = _required(env, "target_platform")
    cuda = _required(env, "cuda_compiler_version")
    arm_variant = None
    if target_platform in PLATFORMS and model.platform(target_platform).arm_variants:
        # conda-forge's pinning: sbsa unless the config says otherwise
        arm_variant = env.get(model.ARM_VARIANT_KEY) or model.platform(target_platform).arm_variants[0].name
    return BuildTarget(
        target_platform=target_platform,
        build_platform=env.get("build_platform") or target_platform,
        cuda=None if cuda == NO_CUDA else cuda,
        blas_impl=_required(env, "blas_impl"),
        cpu_count=_cpu_count(env),
        ci=env.get("CI", ""),
        arm_variant=arm_variant,
    )


def locations_from_environment(env: Mapping[str, str], target: BuildTarget) -> Locations:
    prefix = _required(env, "PREFIX")
    windows = {}
    if target.is_windows:
        windows = {
            name.lower(): _required(env, name) for name in ("LIBRARY_PREFIX", "LIBRARY_INC", "LIBRARY_LIB")
        }
    return Locations(
        prefix=prefix,
        build_prefix=env.get("BUILD_PREFIX") or prefix,
        src_dir=_required(env, "SRC_DIR"),
        pkg_version=_required(env, "PKG_VERSION"),
        cmake_args=env.get("CMAKE_ARGS", ""),
        cmake_library_path=env.get("CMAKE_LIBRARY_PATH", ""),
        **windows,
    )
