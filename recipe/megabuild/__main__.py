import sys

# The helpers use Python 3.10 features (dataclass(kw_only=True), X | Y unions at runtime): on an
# older host Python say so in one line instead of a traceback from deep inside an import. This
# module itself must stay parseable by old Pythons.
OLDEST = (3, 10)
if sys.version_info < OLDEST:
    found = ".".join(str(part) for part in sys.version_info[:3])
    sys.stderr.write(f"megabuild: error: needs Python {OLDEST[0]}.{OLDEST[1]} or newer, this is {found}\n")
    sys.exit(2)

from megabuild.cli import main  # noqa: E402  (after the version check, on purpose)

sys.exit(main())
