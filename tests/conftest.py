# Shared pytest plugins; fixtures live in tests/support/ (append more plugin modules here).
# Import roots (recipe/, scripts/, tests/) come from pyproject's `pythonpath`.
pytest_plugins = ["support.fixtures"]

# Fixture projects carry their own tests (run inside the harness's installed
# environments), and benchmarks are scripts, not tests.
collect_ignore_glob = ["fixture/*", "projects/*", "bench/*"]
