"""The conda-build stand-in: it runs a ``.ci_support`` config of the real recipe the way conda-build
runs a multi-output recipe, on the miniature PyTorch-shaped project in ``tests/fixture/minitorch``.

It stands in for conda-build wherever the real one is not installed: the tests, the benchmarks
and ``python -m feedstock real-build``, which holds it to the real conda-build's packages.

``build_folder``: conda-build's build folder: where a build's source, build, host and test envs live.
``cache_servers``: real cache servers on 127.0.0.1 (SeaweedFS, Redis) for the remote compiler cache.
``channel``: a local channel of real ``.conda`` files: index, solve and install with py-rattler.
``compiler_activation``: what conda-forge's compiler (and nvcc) activation exports into a build script.
``conda_build``: the runner: render, the top-level script, each output's script, the packages.
``cpythons``: the CPythons on this machine, and conda-like prefixes built from them.
``cuda_toolchain``: a real CUDA 13.0 toolchain from NVIDIA's wheels, laid out as conda-forge's packages.
``ninja``: ``.ninja_log`` parsing: which edges each build step re-ran.
``packaging``: real ``.conda`` packages: the run's outputs and the stand-in packages a solve needs.
``prefix``: conda-like prefixes (host, build) and the file snapshots that decide package contents.
``recipe_tests``: an output's rendered ``test:`` commands, run in a test env solved from the channel.
``skbuild_tree``: the fixture built by the real scikit-build-core in host envs at one prefix.
``source``: the fixture's source as conda-build hands it to build.sh: a copy, with the recipe's patches.
``stand_ins``: the local channel of stand-in packages the recipe's environments are solved from.
"""
