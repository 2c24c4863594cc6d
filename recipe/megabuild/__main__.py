import sys

from megabuild.cli import main

sys.exit(main())
