"""Keep the top-level Python's build of the Python-dependent targets for that Python's own output.

conda-build runs the ``pytorch`` outputs in an order that changes from run to run (it comes
from iterating a ``set`` of the variant's Python values, so from the interpreter's string-hash
seed), and each output rebuilds the shared tree's Python-dependent targets for its Python. By
the time the top-level Python's own output runs, another Python's objects usually sit where
its objects were. ``save`` (end of the top level) hard-links every output Ninja has logged and
copies Ninja's logs; ``restore`` (that Python's output) puts back what was replaced since, and
the logs, so Ninja finds the top level's objects up to date instead of compiling them again.
"""
