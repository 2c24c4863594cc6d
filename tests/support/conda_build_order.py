"""The order in which conda-build builds a recipe's ``pytorch`` outputs, from conda-build itself.

    python -m support.conda_build_order RECIPE_DIR CONFIG_YAML SUBDIR

Prints one JSON list of the ``python`` variant values of the ``pytorch`` outputs, in the order of
``MetaData.get_output_metadata_set``: the list ``conda_build.build.build`` iterates to run the
output scripts. Run in a subprocess so that each run gets its own ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import json
import sys
import warnings


def main(recipe: str, config: str, subdir: str) -> None:
    warnings.simplefilter("ignore")  # script_env variables undefined here, and the like
    from conda_build.config import Config
    from conda_build.render import render_recipe

    platform, arch = subdir.split("-", 1)
    cfg = Config(variant_config_files=[config], platform=platform, arch=arch, verbose=False)
    (top, _, _), *others = render_recipe(recipe, config=cfg, no_download_source=True, bypass_env_check=True)
    if others:
        raise SystemExit(f"expected one top-level build (a megabuild), got {1 + len(others)}")
    outputs = top.get_output_metadata_set(permit_unsatisfiable_variants=True, bypass_env_check=True)
    print(json.dumps([str(m.config.variant["python"]) for _, m in outputs if m.name() == "pytorch"]))


if __name__ == "__main__":
    main(*sys.argv[1:4])
