"""The feedstock's maintainer tools, one installed package: ``python -m feedstock <command>``.

``python -m pip install -e .`` (pyproject.toml) installs it beside ``megabuild`` (recipe/megabuild,
the build-time helpers conda-build runs). This package may import megabuild; megabuild never imports
it. build-locally.py at the repository root calls the installed package (``commands.build_locally``).
The command table is :mod:`.cli`; errors follow megabuild's convention (:mod:`.errors`).
docs/architecture.md draws the layers.

Subpackages:

``commands``: one module per maintainer command (render, solver-check, bump, build-all, ...).
``bench``: the benchmarks and the fixture's demo; each prints figures, none passes or fails.
``cross_checks``: the real conda-build and conda-smithy, run in an environment of their own.
``conda_build_standin``: the conda-build stand-in: a config of the real recipe run on tests/fixture/minitorch.
``split_check``: the split-and-check engine behind ``python -m feedstock bump`` and the rehearsal.
``rehearsal``: the rehearsal on real upstream wheels (``python -m feedstock rehearse``).

Modules:

``channel``: rendered outputs as a local conda channel with stand-ins, and user requests solved on it.
``cli``: ``python -m feedstock``: the command table (``COMMANDS``, ``GROUPS``) and its dispatch.
``compiler_cache``: the compiler cache of local and CFEP-03 builds (a local dir, a remote store).
``configs``: the variant files in .ci_support/: listing, parsing and short aliases.
``cuda_packages``: conda-forge's CUDA packages, as the stand-in's toolchain and the rehearsal lay them out.
``doc_tables``: the generated tables of docs/, rendered from the code and data they describe.
``errors``: ``FeedstockError`` and ``run_main``, megabuild's error convention for the tools.
``outputs``: reading the JSON list of rendered outputs (``render --json``); standard library only.
``package_compare``: two sets of built packages compared: the stand-in's and the real conda-build's.
``parity``: docs/packages.md's table of what changes for users of conda-forge's pytorch packages.
``patch_check``: the recipe's patches dry-run against the files upstream wheels hold.
``paths``: where things are in the feedstock (``REPO``, ``RECIPE``, ``SCRIPTS``, ``TESTS``, ...).
``render``: recipe/meta.yaml rendered for one .ci_support config, offline: a strict model of conda-build.
``requirements_compare``: this recipe's requirements against conda-forge's, both rendered by conda-build.
``shards``: a CFEP-03 build's configs split across machines (``build-all --shard I/N``).
``specs``: conda match specs and build strings, one definition for the renderer, channel and stand-in.
``telemetry``: where a build's time went, from Ninja's log and the compiler cache's counters.
``test_commands``: a rendered output's ``test:`` commands, run as conda-build runs them.
``wheel_files``: a torch wheel's file listing (path, size, executable) and the listings kept of it.
``wincmd``: the recipe's Windows test commands that inspect files, run here as bash ``test``.
"""
