"""One module per maintainer command; :mod:`feedstock.cli` maps each ``python -m feedstock <command>``
to its module, imported only when the command runs. Each defines ``PROG`` and ``main(argv) -> int``.

``build_all``: ``build-all``: every config (or an alias / glob) in turn with build-locally.py.
``build_locally``: ``build-locally``: configs built locally in docker, like CI; build-locally.py calls it.
``build_report``: ``build-report``: where a finished build's time went, with a PNG timeline.
``bump_version``: ``bump``: what a new upstream PyTorch version changes for this feedstock (split_check).
``cfep03_bundle``: ``cfep03-bundle``: build_artifacts/ checked for every package, bundled for CFEP-03.
``check_patches``: ``check-patches``: recipe/patches dry-run against the files of upstream wheels.
``list_wheel_files``: ``list-wheel-files``: a torch wheel's files as TSV (path, size, is-executable).
``rehearse``: ``rehearse``: an upstream torch wheel through the recipe's own pipeline (rehearsal).
``render_configs``: ``render``: recipe/meta.yaml rendered for .ci_support configs, offline.
``solver_check``: ``solver-check``: what ``conda install pytorch`` gives users, per config (py-rattler).
``update_doc_tables``: ``update-doc-tables``: the generated tables of docs/, written from code and data.
``upstream_versions``: ``upstream-versions``: what PyTorch vendors and pins, next to the recipe's.
"""
