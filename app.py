#!/usr/bin/env python3
"""The CDK entry point: the only place that reads context; a bad config fails synth in one line."""

from __future__ import annotations

import sys

from aws_cdk import App

from stacks.app import build_app
from stacks.config import ConfigError, parse_config


def main() -> None:
    app = App()
    try:
        config = parse_config(app.node.try_get_context("gco"))
    except ConfigError as error:
        sys.exit(f"gco config error: {error}")
    build_app(config, app=app)
    app.synth()


if __name__ == "__main__":
    main()
