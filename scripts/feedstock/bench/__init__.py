"""The benchmarks (``python -m feedstock bench-*``) and the fixture's demo: each prints figures
and none passes or fails.

``bench_cache``: ``bench-cache``: parse, swap-python and write of a PyTorch-sized CMakeCache.txt.
``bench_compiler_cache``: ``bench-compiler-cache``: what a later config reuses through the compiler cache.
``bench_extra_python``: ``bench-extra-python``: what one more Python costs in the megabuild (fixture).
``bench_stage``: ``bench-stage``: ``megabuild split stage`` and ``install`` on a tree of the wheel's size.
``demo_megabuild``: ``demo-megabuild``: the end-to-end megabuild of the fixture, and what it produced.
``rerender``: ``bench-rerender``: ``conda smithy rerender`` of this feedstock and conda-forge's, timed.
"""
