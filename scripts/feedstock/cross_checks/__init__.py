"""The cross-checks against the real conda-build and conda-smithy (``python -m feedstock cross-check``).

The main suite never installs either: ``run_cross_checks`` builds an environment of their own
(requirements.txt here) and runs the cross-check tests and the other modules with its Python.

``run_cross_checks``: ``cross-check``: that environment, then the cross-check tests, lint and real build.
``conda_build_offline``: ``conda-build`` as the cross-check runs it: offline, from a local channel.
``real_build``: ``real-build``: the real recipe/ built by the real conda-build, held to the stand-in's.
``requirements_compare``: ``requirements-compare``: each output's requirements against conda-forge's.
``smithy_lint``: ``smithy-lint``: conda-smithy's conda-forge lint of the recipe; any lint or hint fails.
"""
