"""The local global address: one loopback URL in front of every Region's proxy (`gco local up`).

`health` checks each Region's proxy as Route 53 health checks do; `front` authenticates bearer keys
from the keys table, chooses Regions with `gco.global_access.routing` and relays the request to the
first that answers; `process` runs it as a part of the stack (`python -m gco.local.front.process`).
docs/local.md says what it models of the AWS design (docs/global.md) and what it does not.
"""
