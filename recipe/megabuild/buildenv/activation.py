"""The CUDA libtorch's activation scripts: ``CF_TORCH_CUDA_ARCH_LIST`` in every environment it is in.

conda-forge's libtorch exports the architecture list it was built with, so that a downstream
extension build can ask for the same ones (``TORCH_CUDA_ARCH_LIST="${CF_TORCH_CUDA_ARCH_LIST}"``).
The list is the build's own (:func:`megabuild.buildenv.switches`, the ``TORCH_CUDA_ARCH_LIST``
that ``megabuild env`` exports), written into the templates in ``recipe/activation/``:

- Linux: ``etc/conda/activate.d/libtorch_activate.sh`` and ``deactivate.d/libtorch_deactivate.sh``;
- Windows: the ``.bat`` twins, with CRLF line ends (cmd's parser expects them).

A CPU build installs none. The activation sets the variable only when it is unset and marks that
it did (``CF_TORCH_CUDA_ARCH_LIST_BACKUP=NOT_SET``); the deactivation removes both only then.
"""

from __future__ import annotations

import re
from pathlib import Path

from megabuild.buildenv.environment import switches
from megabuild.buildenv.target import BuildTarget
from megabuild.errors import MegabuildError

VARIABLE = "CF_TORCH_CUDA_ARCH_LIST"
PLACEHOLDER = f"@{VARIABLE}@"
TEMPLATES = Path(__file__).resolve().parents[2] / "activation"
"""``recipe/activation``: the scripts with the placeholder (all conda-build sees is ``recipe/``)."""
# what a list may hold, so that it needs no quoting in either shell: "7.5;8.0;12.0+PTX"
_LIST = re.compile(r"[0-9]+\.[0-9]+[a-z]?(\+PTX)?(;[0-9]+\.[0-9]+[a-z]?(\+PTX)?)*")


def _scripts(target: BuildTarget) -> tuple[tuple[str, str], ...]:
    """(template name, path under the prefix) of each script of ``target``'s platform."""
    ext = "bat" if target.is_windows else "sh"
    kinds = ("activate", "deactivate")
    return tuple((f"libtorch_{c}.{ext}", f"etc/conda/{c}.d/libtorch_{c}.{ext}") for c in kinds)


def activation_scripts(target: BuildTarget, templates: Path = TEMPLATES) -> dict[str, str]:
    """Path under the prefix -> text, for a CUDA target; empty for a CPU one."""
    if target.cuda is None:
        return {}
    arch_list = switches(target)["TORCH_CUDA_ARCH_LIST"]
    if not _LIST.fullmatch(arch_list):
        raise MegabuildError(f"activation-scripts: {arch_list!r} is not a list like '7.5;8.0;12.0+PTX'")
    scripts = {}
    for name, dest in _scripts(target):
        try:
            text = (templates / name).read_text(encoding="utf-8")
        except OSError as exc:
            raise MegabuildError(f"activation-scripts: cannot read the template {name}: {exc}") from None
        scripts[dest] = text.replace(PLACEHOLDER, arch_list)
    return scripts


def install_activation_scripts(target: BuildTarget, prefix: Path, templates: Path = TEMPLATES) -> list[Path]:
    """Write the scripts of :func:`activation_scripts` into ``prefix``; the paths written."""
    written = []
    newline = "\r\n" if target.is_windows else "\n"
    for dest, text in activation_scripts(target, templates).items():
        path = prefix / dest
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline=newline)
        written.append(path)
    return written
