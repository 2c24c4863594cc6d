"""The environment that reaches PyTorch's CMake cache on every configure.

PyTorch 2.14's ``cmake/EnvVarForwarding.cmake`` writes every ``BUILD_*``, ``USE_*`` and
``CMAKE_*`` environment variable (and names ending in ``EXITCODE``), plus a passthrough list,
into the cache with FORCE whenever the value differs; ``[tool.scikit-build.env]`` turns
``MAX_JOBS`` into ``CMAKE_BUILD_PARALLEL_LEVEL`` on the way. So a variable that one step exports
and another does not (or with another value) flips the cache, and what depends on it rebuilds:
``CMAKE_CXX_COMPILER_LAUNCHER`` alone would recompile every object.

The top level records what it forwarded; each pytorch output compares its own environment with
that record before it builds and refuses to build on any difference.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from megabuild.errors import MegabuildError

_FORWARDED = re.compile(r"^(BUILD_|USE_|CMAKE_)|EXITCODE(__TRYRUN_OUTPUT)?$")
# EnvVarForwarding.cmake's _ENV_PASSTHROUGH and _ENV_ALIASES sources (upstream, 2.14), and
# MAX_JOBS, which pyproject.toml's [tool.scikit-build.env] forwards as CMAKE_BUILD_PARALLEL_LEVEL.
PASSTHROUGH = frozenset(
    {
        "UBSAN_FLAGS", "BLAS", "WITH_BLAS", "CUDA_HOST_COMPILER", "CUDA_NVCC_EXECUTABLE",
        "CUDA_SEPARABLE_COMPILATION", "CUDNN_LIBRARY", "CUDNN_INCLUDE_DIR", "CUDNN_ROOT",
        "CUDNN_LIB_DIR", "EXPERIMENTAL_SINGLE_THREAD_POOL", "FLASH_ATTENTION_MAX_JOBS",
        "INSTALL_TEST", "INTEL_MKL_DIR", "INTEL_OMP_DIR", "MKL_THREADING", "MKLDNN_CPU_RUNTIME",
        "MSVC_Z7_OVERRIDE", "CAFFE2_USE_MSVC_STATIC_RUNTIME", "Numa_INCLUDE_DIR", "Numa_LIBRARIES",
        "ONNX_ML", "ONNX_NAMESPACE", "ATEN_THREADING", "WERROR", "OPENSSL_ROOT_DIR",
        "STATIC_DISPATCH_BACKEND", "SELECTED_OP_LIST", "TORCH_CUDA_ARCH_LIST", "TORCH_XPU_ARCH_LIST",
        "TRACING_BASED", "CUDAHOSTCXX", "CUDACXX", "MAX_JOBS",
    }
)  # fmt: skip
RECORD_NAME = "forwarded-env.json"


def is_forwarded(name: str) -> bool:
    return bool(_FORWARDED.search(name)) or name in PASSTHROUGH


def forwarded(env: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``env`` that reach the cache, sorted by name."""
    return {name: env[name] for name in sorted(env) if is_forwarded(name)}


def record(path: Path, env: Mapping[str, str]) -> dict[str, str]:
    """Write what ``env`` forwards to ``path`` (atomically) and return it."""
    values = forwarded(env)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")
    tmp.replace(path)
    return values


def load(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise MegabuildError(f"{path} is missing: the top level records its forwarded environment") from None
    except (OSError, ValueError) as exc:
        raise MegabuildError(f"{path} is unreadable ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise MegabuildError(f"{path} is not a JSON object of strings")
    return {str(k): v for k, v in data.items()}


def differences(recorded: Mapping[str, str], current: Mapping[str, str]) -> list[str]:
    """One line per forwarded variable whose value differs from the record."""
    now = forwarded(current)
    lines = []
    for name in sorted(set(recorded) | set(now)):
        if name not in now:
            lines.append(f"{name} unset (top level: {recorded[name]!r})")
        elif name not in recorded:
            lines.append(f"{name}={now[name]!r} (unset at the top level)")
        elif recorded[name] != now[name]:
            lines.append(f"{name}={now[name]!r} (top level: {recorded[name]!r})")
    return lines


def check_same_as_top_level(path: Path, env: Mapping[str, str]) -> int:
    """Raise unless ``env`` forwards exactly what the top level recorded; the count compared."""
    recorded = load(path)
    diff = differences(recorded, env)
    if diff:
        shown = "; ".join(diff[:6]) + (f"; and {len(diff) - 6} more" if len(diff) > 6 else "")
        raise MegabuildError(
            f"this step's environment would change {len(diff)} cache entries that PyTorch's "
            f"EnvVarForwarding.cmake sets on every configure (rebuilding what depends on them): {shown}"
        )
    return len(recorded)
