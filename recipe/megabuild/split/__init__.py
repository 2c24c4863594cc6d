"""Split PyTorch's built ``torch/`` tree into the feedstock's packages.

The assignment of files to outputs is data (``recipe/split_spec.json``); the
modules here only load it (:mod:`.spec`), move files (:mod:`.fsmove`), stage a
build tree (:mod:`.stage`), install a staged output (:mod:`.install`), link a
pip-installed ``torch`` back to libtorch (:mod:`.link_back`) and check the
result (:mod:`.verify`). The three commands that change files each compute a
plan first and run it through one journalled :func:`.plan.apply`.
"""
