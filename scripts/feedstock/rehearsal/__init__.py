"""The rehearsal on real binaries (``python -m feedstock rehearse``, docs/rehearsal.md): an upstream
torch wheel through the recipe's own build pipeline in place of ``pip install .``, packed as ``.conda``
files with the rendered recipe's metadata, installed with py-rattler and tested there. The split
itself is ``feedstock.split_check.split_run``, the procedure the version-bump check runs.

``checks``: what runs in the rehearsal's env: the rendered ``test:`` sections, binary checks, a smoke test.
``compare``: the same wheel installed by pip into a plain venv, as a pip user gets it, compared.
``cuda_layout``: NVIDIA's CUDA runtime wheels laid out where conda-forge's CUDA packages put their files.
``linking``: files linked into a directory as conda links a package's files into an env.
``patches``: the recipe's patches on the files an upstream wheel holds, as the build would have packed them.
``tree``: the wheel laid out as the build's ``pip install .`` would have left it (``DerivedWheel``).
``wheels``: the downloads: the torch wheel and every wheel its METADATA pins for Linux, in the shared cache.
"""
