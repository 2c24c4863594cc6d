"""Helpers shared by the feedstock's scripts (rendering, config listing, checks).

``configs`` is standard-library only and Python 3.9 compatible because the stdlib-only
``build-locally.py`` imports it; everything else may use the packages in tests/requirements.txt.
"""
