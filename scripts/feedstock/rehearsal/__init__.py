"""The rehearsal on real binaries (``scripts/rehearse.py``, docs/rehearsal.md): an upstream torch
wheel through the recipe's own build pipeline in place of ``pip install .``, packed as ``.conda``
files with the rendered recipe's metadata, installed with py-rattler and tested there.

Modules, one job each: :mod:`.wheels` (the downloads), :mod:`.patches` (the recipe's patches on the
files a wheel holds), :mod:`.tree` (the wheel laid out as ``pip install .`` leaves it: the split
procedure's tree source, ``DerivedWheel``; the split itself is ``feedstock.bump.split_run``, the
procedure the version-bump check runs), :mod:`.linking` (files linked as conda links a package's),
:mod:`.cuda_layout` (NVIDIA's runtime wheels where conda-forge's CUDA packages put their files),
:mod:`.checks` (the rendered test commands, the binary checks, the smoke test) and :mod:`.compare`
(the plain-pip comparison).
"""
