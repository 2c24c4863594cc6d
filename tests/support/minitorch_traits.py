"""Traits of upstream's binaries that the miniature PyTorch carries, as the end-to-end tests read them
from its built packages: what the recipe's binary check has to judge on real builds.

* ``TORCH_INTERNAL_ASSERT`` (``c10/util/Exception.h``) concatenates ``__FILE__`` into its message
  literal, ``<cond> INTERNAL ASSERT FAILED at "<work>/<source>":<line>, please report a bug to
  PyTorch.``: a build path inside a longer C string, next to ``__FILE__`` alone. libtorch_cpu holds
  one from ``Dispatch.cpp``, libtorch_cuda from ``RowwiseScaledMM.cu``, torch_python from the inline
  ``call_op`` of ``Dispatch.h`` (a header's, as upstream's torch_python holds its headers').
* ``cmake/Codegen.cmake``'s ``_BUILD_FOR_ADDITIONAL_ARCHS`` compiles ``RowwiseScaledMM.cu`` for
  architectures beyond ``TORCH_CUDA_ARCH_LIST`` (:data:`ROWWISE_ADDED_CUBINS`).
"""

from __future__ import annotations

import re
from pathlib import Path

from feedstock.conda_build_standin.conda_build import RunResult
from megabuild import model

ASSERT_TAIL = b", please report a bug to PyTorch. "
# the sources whose TORCH_INTERNAL_ASSERT each library holds, relative to the work dir
ASSERT_SOURCES = {
    "libtorch_cpu.so": "aten/src/ATen/core/Dispatch.cpp",
    "libtorch_cuda.so": "aten/src/ATen/native/cuda/RowwiseScaledMM.cu",
    "libtorch_python.so": "aten/src/ATen/core/Dispatch.h",
}

# Codegen.cmake's rules for RowwiseScaledMM.cu ("89;90a;100a;103f;110a;120a;121a") with CUDA 13.0,
# where every version gate is open: the cubin cuobjdump lists (103f: sm_103, no suffix) -> the
# cubin of the list whose gencode flags it needs
ROWWISE_ADDED_CUBINS = {
    "sm_89": "sm_86",
    "sm_90a": "sm_90",
    "sm_100a": "sm_100",
    "sm_103": "sm_100",
    "sm_110a": "sm_110",
    "sm_120a": "sm_120",
    "sm_121a": "sm_120",
}
# the kernel RowwiseScaledMM.cu defines (ATen/cuda/DeviceKernel.cuh's MINITORCH_KERNEL)
ROWWISE_KERNEL = b"minitorch_rowwise_scaled_kernel"


def added_cubins(list_cubins: set[str]) -> set[str]:
    """The cubins RowwiseScaledMM.cu adds to a CUDA 13.0 build whose list asks for ``list_cubins``."""
    return {added for added, base in ROWWISE_ADDED_CUBINS.items() if base in list_cubins}


def assert_messages(library: Path, work: Path) -> dict[str, bytes]:
    """The TORCH_INTERNAL_ASSERT messages in ``library`` that name a source under ``work``, by that
    source (relative): each a whole C string, the quoted path inside it."""
    at = rb"[\x20-\x7e]* INTERNAL ASSERT FAILED at \"" + re.escape(str(work).encode())
    pattern = re.compile(at + rb"/([^\"\0]+)\":[0-9]+" + re.escape(ASSERT_TAIL) + rb"(?=\0)")
    return {m.group(1).decode(): m.group(0) for m in pattern.finditer(library.read_bytes())}


def traits_libraries(run: RunResult) -> list[Path]:
    """The packaged libraries that carry an assert message, libtorch's and every pytorch's; not the
    links to them (pytorch's ``torch/lib`` links to libtorch's libraries, ``lib`` to torch_python)."""
    pkgs = [*run.packages_named(model.LIBTORCH), *run.packages_named(model.PYTORCH)]
    found = [pkg.root / f for pkg in pkgs for f in pkg.files if Path(f).name in ASSERT_SOURCES]
    return [p for p in found if not p.is_symlink()]


def assert_traits(run: RunResult) -> list[str]:
    """Every library of :data:`ASSERT_SOURCES` the run packaged (libtorch_cuda: a CUDA config's) holds
    its source's assert message with the work dir's path inside it, and that path as a C string; the
    names of the libraries checked."""
    libraries = traits_libraries(run)
    names = sorted(p.name for p in libraries)
    assert {"libtorch_cpu.so", "libtorch_python.so"} <= set(names), names
    assert names.count("libtorch_python.so") == len(run.packages_named(model.PYTORCH)), names
    for library in libraries:
        source = ASSERT_SOURCES[library.name]
        data = library.read_bytes()
        messages = assert_messages(library, run.src_dir)
        assert source in messages, (library, sorted(messages))
        alone = re.compile(rb"(?<![\x20-\x7e])" + re.escape(f"{run.src_dir}/{source}".encode()) + rb"\0")
        assert alone.search(data), (library, source)
    return names
