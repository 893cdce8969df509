#!/usr/bin/env python3
"""The CDK entry point: the only place that reads context; a bad config fails synth in one line."""

from __future__ import annotations

import os
import sys

from stacks.app import build_app, new_app
from stacks.config import ConfigError, parse_config, with_overrides


def main() -> None:
    app = new_app(os.environ)
    try:
        context = app.node.get_all_context()
        config = parse_config(with_overrides(context.get("gco"), context))
    except ConfigError as error:
        sys.exit(f"gco config error: {error}")
    build_app(config, app=app)
    app.synth()


if __name__ == "__main__":
    main()
