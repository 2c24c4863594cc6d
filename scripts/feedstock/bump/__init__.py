"""The version-bump check behind ``scripts/bump_version.py NEW``.

For a new upstream version it takes upstream's wheels (``wheels``: cache or ``pip download``,
per ``platforms``), compares what they hold and declare with what the feedstock builds today
(``recipe``): Python range, build backend and requirements (``metadata``), file listings in
the split spec's terms (``listings``), the recipe's patches (``patches``), and the split with
the recipe's rendered file tests (``split_run``). ``run`` does the steps in order and returns
one ``report``. ``tools`` is the one place that calls the other tools of the feedstock
(list_wheel_files.py, check_patches.py, megabuild's split spec).
"""
