"""Checks of a package's built binaries, from their headers (no binutils, otool or dumpbin).

Readers for ELF (:mod:`.elf`), Mach-O including fat files (:mod:`.macho`) and PE/COFF
(:mod:`.pe`) give one :class:`~.codefile.CodeFile` each; :mod:`.checks` turns the files of an
installed package into findings, one line each: dependencies that do not resolve inside the
environment, run paths leaving the prefix, build-prefix strings, executable stacks, GLIBC symbol
versions newer than the config's ``c_stdlib_version``. :mod:`.cuda_arch` compares a CUDA library's
fatbin with ``TORCH_CUDA_ARCH_LIST`` (``cuobjdump``); :mod:`.torch_config` compares
``torch.__config__.show()`` with the variant. Run from the recipe's ``test:`` commands as
``python -m megabuild check-binaries`` and ``python -m megabuild check-torch-config``.
"""
