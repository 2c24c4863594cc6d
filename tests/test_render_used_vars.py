"""conda-build's used variables, hashes and build strings of every output, from the real render.

conda-build decides which variant keys an output depends on by scanning meta.yaml and the
output's script: ``$key`` only as the first ``$`` of a line of build.sh,
``%key%`` in bld.bat. A key the build scripts leave to Python (``megabuild env``) is not exported
to them unless a line names it, and a key counted as used multiplies builds and enters the hash.

- ``test_build_scripts_name_the_keys_megabuild_env_reads``: every variant key that
  ``megabuild.buildenv`` reads counts as used by the outputs built with build.sh / bld.bat;
- ``test_render_matches_the_baseline``: the render of this checkout against the render of
  another commit (``FEEDSTOCK_RENDER_BASELINE``, a git ref; default ``HEAD``, which checks
  uncommitted changes): the same outputs, build strings (hash included) and numbers,
  requirements, used variables and hash inputs, except for the keys in ``RETIRED_KEYS``.

Cross-checks: they need conda-build (``python -m feedstock cross-check``).
"""

from __future__ import annotations

import io
import os
import subprocess
import tarfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from feedstock.configs import Config, list_configs
from feedstock.paths import REPO
from megabuild.buildenv.target import VARIANT_KEYS
from support.cross_checks import import_tool, unavailable

BASELINE_ENV = "FEEDSTOCK_RENDER_BASELINE"
# a variant key that must not come back: every config is a megabuild, so it would select nothing
RETIRED_KEYS = frozenset({"megabuild"})
CONFIGS = list_configs(REPO)
BUILD_SCRIPTS = ("build.sh", "bld.bat")


def _ids(config: Config) -> str:
    return config.name


def render(feedstock: Path, config_name: str) -> list[dict[str, Any]]:
    """Every output conda-build renders for a config of ``feedstock`` (not finalized, as
    conda-smithy renders), with what decides its hash."""
    api = import_tool("conda_build.api")
    config = feedstock / ".ci_support" / f"{config_name}.yaml"
    subdir = next(c for c in CONFIGS if c.name == config_name).subdir
    plat, arch = subdir.split("-", 1)
    metas = api.render(
        str(feedstock / "recipe"), variant_config_files=[str(config)], finalize=False,
        bypass_env_check=True, platform=plat, arch=arch,
    )  # fmt: skip
    outputs = []
    for m, _, _ in metas:
        if m.skip():
            continue
        outputs.append(
            {
                "name": m.name(),
                "version": m.version(),
                "build": m.build_id(),
                "number": m.build_number(),
                "used_vars": sorted(m.get_used_vars()),
                "hash_contents": {k: str(v) for k, v in sorted(m.get_hash_contents().items())},
                "requirements": {
                    s: list(m.get_value(f"requirements/{s}", []) or []) for s in ("build", "host", "run")
                },
                "variant": {k: str(m.config.variant.get(k)) for k in ("python", "with_magma")},
            }
        )
    return sorted(
        outputs, key=lambda o: (o["name"], o["variant"]["python"], o["variant"]["with_magma"], o["build"])
    )


@cache
def baseline_tree() -> Path:
    """recipe/ and .ci_support/ of the baseline commit, extracted once per session."""
    ref = os.environ.get(BASELINE_ENV, "HEAD")
    proc = subprocess.run(
        ["git", "-C", str(REPO), "archive", "--format=tar", ref, "--", "recipe", ".ci_support"],
        capture_output=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        unavailable(f"git archive {ref} failed: {proc.stderr.decode().strip()[:200]}")
    dest = Path(os.environ.get("TMPDIR", "/tmp")) / f"render-baseline-{os.getpid()}"
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _without_retired(output: dict[str, Any]) -> dict[str, Any]:
    out = dict(output)
    out["used_vars"] = [v for v in output["used_vars"] if v not in RETIRED_KEYS]
    out["hash_contents"] = {k: v for k, v in output["hash_contents"].items() if k not in RETIRED_KEYS}
    out.pop("build")  # its hash follows hash_contents; compared where no retired key was an input
    return out


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_build_scripts_name_the_keys_megabuild_env_reads(config: Config) -> None:
    """``megabuild env`` reads these keys; conda-build must export them to the scripts running it."""
    variants = import_tool("conda_build.variants")
    keys = [k for k in VARIANT_KEYS if k in config.values]
    # the script conda-build runs for the config's platform (arm_variant_type: linux-aarch64 only)
    for script in [s for s in BUILD_SCRIPTS if s.endswith(".bat") == config.subdir.startswith("win-")]:
        path = REPO / "recipe" / script
        scan = (
            variants.find_used_variables_in_batch_script
            if script.endswith(".bat")
            else variants.find_used_variables_in_shell_script
        )
        # target_platform: conda-build counts it as used by every output, whatever the scripts say
        missing = set(keys) - scan(keys, path) - {"target_platform"}
        assert not missing, f"{script} names no {sorted(missing)} where conda-build would see it"
        assert not scan(list(RETIRED_KEYS), path), f"{script} still names a retired key"
    for output in render(REPO, config.name):
        assert not RETIRED_KEYS & set(output["used_vars"]), output["name"]
        if output["name"] == "pytorch":
            assert set(keys) <= set(output["used_vars"]), (output["name"], output["used_vars"])


@pytest.mark.parametrize("config", CONFIGS, ids=_ids)
def test_render_matches_the_baseline(config: Config) -> None:
    base = baseline_tree()
    if not (base / ".ci_support" / f"{config.name}.yaml").is_file():
        pytest.fail(f"{config.name} is not a config of the baseline", pytrace=False)
    ours, theirs = render(REPO, config.name), render(base, config.name)
    assert [_without_retired(o) for o in ours] == [_without_retired(o) for o in theirs]
    for mine, old in zip(ours, theirs):
        if not RETIRED_KEYS & set(old["hash_contents"]):
            assert mine["build"] == old["build"], (mine["name"], mine["build"], old["build"])
