"""The recipe's cp314t outputs, as our render gives them for every .ci_support config (the
conda-build cross-check, test_render_recipe.py, shows conda-build renders the same).

Upstream's cp314t wheels declare the same Requires-Dist as the cp312 ones (tests/data/README.md),
so the cp314t pytorch's run requirements are the cp314 pytorch's but for the Python ABI.
"""

from __future__ import annotations

import fnmatch
import re
from functools import cache

import pytest
from feedstock.configs import list_configs
from feedstock.paths import RECIPE, REPO
from feedstock.render import RenderedOutput, render_config

FREETHREADED = "3.14.* *_cp314t"
GIL = "3.14.* *_cp314"
GIL_CHECK = "not sys._is_gil_enabled()"


@cache
def _outputs() -> dict[str, tuple[RenderedOutput, ...]]:
    return {c.name: tuple(render_config(c.path, RECIPE, build_platform=c.subdir)) for c in list_configs(REPO)}


def _pytorch(outputs: tuple[RenderedOutput, ...], python: str) -> list[RenderedOutput]:
    return [o for o in outputs if o.name == "pytorch" and o.variant.get("python") == python]


def _without_python(depends: list[str]) -> list[str]:
    """The run requirements but Python's; libtorch's exact pin without its hash (on macOS each
    Python has its own config, and so its own libtorch build)."""
    kept = [d for d in depends if d.split()[0] not in ("python", "python_abi")]
    return sorted(re.sub(r"_h[0-9a-f]{7}_", "_h<hash>_", d) for d in kept)


@pytest.mark.slow
def test_every_config_building_314_builds_314t_alike() -> None:
    configs = _outputs()
    freethreaded_configs = [name for name, outs in configs.items() if _pytorch(outs, FREETHREADED)]
    print(f"\n{len(freethreaded_configs)} of {len(configs)} configs build pytorch for {FREETHREADED}")
    for name, outputs in configs.items():
        gil = _pytorch(outputs, GIL)
        if not gil:
            continue
        # macOS has one config per Python: the free-threaded one is the sibling ...____cp314t
        sibling = (
            configs.get(name.replace("____cp314", "____cp314t"), ()) if name.startswith("osx") else outputs
        )
        ft = _pytorch(sibling, FREETHREADED)
        assert len(gil) == len(ft) == 1, (name, len(gil), len(ft))
        assert _without_python(ft[0].depends) == _without_python(gil[0].depends), name
        assert "python_abi 3.14.* *_cp314t" in ft[0].depends, ft[0].depends
        assert "python_abi 3.14.* *_cp314" in gil[0].depends, gil[0].depends
        assert ft[0].build_string != gil[0].build_string  # the hash tells them apart
        # the GIL check runs on both; it asserts something only on the free-threaded interpreter
        assert any(GIL_CHECK in c for c in ft[0].test.get("commands", [])), name
        for meta in (o for o in (*outputs, *sibling) if o.name in ("pytorch-cpu", "pytorch-gpu")):
            (spec,) = [d for d in meta.depends if d.split()[0] == "pytorch"]
            glob = spec.split()[2]
            assert fnmatch.fnmatchcase(ft[0].build_string, glob), (meta.name, glob, ft[0].build_string)
            assert fnmatch.fnmatchcase(gil[0].build_string, glob), (meta.name, glob, gil[0].build_string)
    assert len(freethreaded_configs) == len([n for n in configs if not n.startswith("osx")]) + 3
