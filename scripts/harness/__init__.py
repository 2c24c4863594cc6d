"""End-to-end harness: run a ``.ci_support`` config of the real recipe the way conda-build runs a
multi-output recipe, on the miniature PyTorch-shaped project in ``tests/fixture/minitorch``.

Modules:

``ninja``
    ``.ninja_log`` parsing: which edges each build step re-ran.
``prefix``
    conda-like prefixes (host, build) from the CPythons on this machine; file snapshots.
``activation``
    what conda-forge's compiler (and nvcc) activation exports: CMAKE_ARGS with its find roots,
    CFLAGS, LDFLAGS, ... (from the real activation scripts).
``packaging``
    real ``.conda`` files (conda-package-handling) for outputs and stand-ins (python with a
    relocatable ``_sysconfigdata``, numpy, libmagma, BLAS: netlib for hosts, OpenBLAS at run time).
``channel``
    index a local channel, solve and install with py-rattler.
``conda_build``
    the runner: render, top-level script, each output's script, packages.
"""
