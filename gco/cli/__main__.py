"""`python -m gco.cli` runs the `gco` command."""

import sys

from gco.cli import main

sys.exit(main())
