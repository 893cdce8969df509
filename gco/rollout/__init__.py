"""Canary rollouts decided by a paired, measured comparison (`gco inference rollout`).

`decision` is the rule (pure: blocks of paired samples in, a verdict out, through the bench's paired
bootstrap `gco.bench.analysis.stats.ratio_of_medians`); `blocks` the balanced order of one block's
requests; `state` the rollout's whole state, a JSON document a Step Functions execution carries from
one step to the next; `steps` one step of a rollout over its ports (the fenced store's canary actions,
the traffic sender, the evidence store, a clock); `traffic` the sender's real HTTP adapter (requests
pinned to a version by the proxy's `X-Gco-Version` request header); `evidence` the rollout's evidence
record; `service` what the rollout state machine's Lambdas do; `execution` the start of its execution.
Nothing below this package knows it exists (`docs/rollout.md`).
"""
