"""The split-and-check engine behind ``python -m feedstock bump NEW`` and the rehearsal.

For a new upstream version it takes upstream's wheels and compares what they hold and declare with
what the feedstock builds today, then runs the split with the recipe's rendered file tests: the
build's own pipeline (``megabuild.pipeline``) on a layout whose files come from a listing or a wheel.
The rehearsal runs the same split procedure on a real wheel.

``file_tests``: the rendered ``test:`` commands that only inspect files, run against a laid-out prefix.
``layout``: what the split procedure takes: one wheel's layout, its config, the source of its files.
``listings``: the new wheels' file listings against the ones in tests/data, in the split spec's terms.
``metadata``: the new wheels' METADATA and WHEEL (Python range, backend, requirements) against the recipe.
``patches``: every recipe patch dry-run against the files each new wheel holds.
``platforms``: the platforms the recipe builds, as the check picks them (``--platforms``).
``python_builds``: a CPython build as wheels, listings and variants name it (3.14 and 3.14t apart).
``recipe``: what the feedstock builds today: its version, its Pythons and the configs to render.
``report``: the one report of a check: findings in sections, one line each.
``run``: the version-bump check: every step in order, one report.
``split_run``: the split procedure: a layout through the build pipeline, checked by the file tests.
``split_spec``: the recipe's split spec (``megabuild.split.spec``) as the check asks it.
``tree_build``: the build pipeline's handlers on a wheel's tree laid out from a tree source.
``wheels``: upstream's torch wheels of one version: from the shared cache or downloaded.
"""
