"""One Region's runtime of the local stack: `cluster.LocalClusters` puts together, over the Region's
stand-in API server, the engine runner (`kubelet`, with the engine table of `engines` and the restart
policy), the HPA stand-in (`autoscaler`), the Service network (`services`), the proxy (the real
nginx, `nginx`, or the in-process `router`) and the reconciler with its DynamoDB-stream poller
(`reconcilers`, `poller`); `loop` is the background pass each controller runs, and `node` the
process that runs one Region for `gco local up`. It imports neither the moto server nor the
walk-through.
"""
