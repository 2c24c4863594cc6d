# Shared pytest plugins; fixtures live in tests/support/ (append more plugin modules here).
import sys

from support.paths import RECIPE, SCRIPTS

# The build-time helpers (recipe/megabuild) and the maintainer tools (scripts/feedstock)
# are imported by the tests as they are run: from their own directories.
for _path in (RECIPE, SCRIPTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

pytest_plugins = ["support.fixtures"]

# Fixture projects carry their own tests (run inside the harness's installed
# environments), and benchmarks are scripts, not tests.
collect_ignore_glob = ["fixture/*", "projects/*", "bench/*"]
