"""The version-bump check behind ``scripts/bump_version.py NEW``.

For a new upstream version it takes upstream's wheels (``wheels``: cache or ``pip download``,
per ``platforms``), compares what they hold and declare with what the feedstock builds today
(``recipe``): Python range, build backend and requirements (``metadata``), file listings in
the split spec's terms (``listings``), the recipe's patches (``patches``), and the split with
the recipe's rendered file tests (``split_run``: the build's own pipeline, run by
``tree_build`` on a ``layout`` whose files come from a listing or an unpacked wheel, tested
by ``file_tests``; ``pythons`` tells 3.14 from 3.14t). ``run`` does the steps in order and returns
one ``report``. ``tools`` turns the library's wheel and patch tools (``feedstock.wheel_files``,
``feedstock.patch_check``) into this package's typed values; ``split_spec`` asks megabuild's
split spec.
"""
