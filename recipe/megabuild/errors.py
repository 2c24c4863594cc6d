"""The one exception type the command line turns into a one-line error."""


class MegabuildError(Exception):
    """A failure the user can act on; printed as ``megabuild: error: <msg>``."""
