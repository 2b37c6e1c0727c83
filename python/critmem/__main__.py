"""`python -m critmem`: the same as the `critmem` command."""

import sys

from critmem.cli import main

sys.exit(main())
