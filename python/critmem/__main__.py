"""`python -m critmem`: the same as the `critmem` command."""

import sys

from critmem.cli import main

if __name__ == "__main__":  # not when a spawned worker process imports it
    sys.exit(main())
