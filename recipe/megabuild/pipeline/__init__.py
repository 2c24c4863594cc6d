"""The build pipeline (``megabuild build``): the recipe's steps, from the top level to each
Python's output.

PyTorch 2.14 builds with scikit-build-core, which configures, builds and installs on every run.
These modules drive it so that libtorch is built once and every further Python rebuilds only the
Python-dependent targets in the same ``build/`` tree (``$SRC_DIR/build``, scikit-build-core's
fixed ``build-dir``):

``description``
    the pipeline itself: every conda-build script's steps in order, with their platform rules;
    the version-bump check runs the same object on placeholder files.
``options``
    everything a step needs, resolved once from conda-build's environment.
``top_level_record``
    the Python the top level built with (the megabuild Python), recorded for every output.
``forwarded_env``
    the variables PyTorch's ``EnvVarForwarding.cmake`` writes into the cache on every configure;
    recorded by the top level, and every output must export the same.
``skbuild_state``
    ``build/.skbuild-info.json``: adopted for each output's own scikit-build-core, so that the
    backend does not clear the cache; a clearing that happens anyway is an error.
``wheel_settings``
    the ``-C`` settings of each ``pip install .``, the same for every Python (one six dir for the
    whole build); for the pytorch outputs, ``wheel.exclude`` also keeps libtorch's files
    (installed from the libtorch package) out of the wheel.
``rebuild_guard``
    before each per-Python pass: every edge it would rebuild outside the Python-dependent
    targets, with Ninja's reason (a warning, never a failure), counted in the pass's record.
``frontend``
    one ``pip install .`` pass, with what it installed and packed measured.
``telemetry``
    each pass's wall time, Ninja log and compiler-cache counters for python -m feedstock build-report.
``prefix_clear``
    the top level's pip install, taken out of the host prefix once staged (outputs see none of it).
``cli``
    ``megabuild build <output>``: each conda-build script is one call.
``steps``
    the handler of each step on the real build (typed calls into split, cache, build state, magma).
"""
