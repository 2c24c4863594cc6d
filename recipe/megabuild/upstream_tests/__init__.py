"""The upstream PyTorch tests of the ``pytorch`` output's test section (``recipe/upstream_tests.json``)."""
