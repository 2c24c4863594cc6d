"""Build-time helpers for the PyTorch megabuild feedstock.

Run as ``PYTHONPATH=$RECIPE_DIR python -m megabuild <command> ...`` from the
recipe's build scripts. Standard library only: conda-build sees nothing but
``recipe/`` and the helpers run under every host Python the recipe builds for.
"""
