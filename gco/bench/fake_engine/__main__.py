"""`python -m gco.bench.fake_engine`: run the fake engine (`cli.main`)."""

import sys

from gco.bench.fake_engine.cli import main

sys.exit(main())
