"""The embedded stack for one machine: a local AWS endpoint and the walk-through that uses it.

Six wings: `assembly` (the synthesized app as the local stack runs it: a cloud assembly's
functions from their assets, their mappings and roles, EKS's and API Gateway's parts), `processes`
(stopping a child, the listen backlog and the garbage-collector setting of the stand-in servers,
the state directory's lock and record of started processes), `moto` (the moto server and its
patches), `llama` (the CPU engine and its build), `standin` (the Kubernetes API server stand-in)
and `region` (one Region's runtime: its cluster, engines, autoscaler, Service network, proxy,
reconciler and stream poller, and the `node` process that runs them); `demo` (the walk-through)
sits on top. Beside them: `stack` (`gco local up|down`) and the errors. Imports run one way, from
the walk-through down to the processes (docs/layout.md).
"""
