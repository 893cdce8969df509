"""The syntax of an AWS Region name (`us-east-1`), below the endpoints' name checks and the SDK
clients' home Region, which both read it (`gco.endpoints.names.region`, `gco.aws.home_region`)."""

from __future__ import annotations

import re

REGION_SYNTAX = re.compile(r"[a-z]{2,4}(-[a-z]+)+-[0-9]{1,2}")
REGION_MAX = 25
