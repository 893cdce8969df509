"""The fixed bearer tokens of the local stack's stand-in Kubernetes API servers (loopback only).

Here, with no imports, so that whoever talks to a stand-in reads them without importing the local
stack: the reconcilers (`gco.local.region.reconcilers`) and the validation matrix reaching the stand-ins as
the GPU runner does the Regional clusters (`gco.validation.connect`). A real cluster never sees
them: EKS authenticates IAM identities.
"""

# The Regional reconciler's token: its grant is the reconciler's RBAC (`gco.reconcile.access`).
LOCAL_TOKEN = "gco-local-token"  # noqa: S105 - the loopback stand-in's fixed token
# The token the matrix reads the stand-ins with: the GPU runner's identity and read-only grant, as
# its access entry and RBAC give it in a Regional cluster.
RUNNER_TOKEN = "gco-local-runner-token"  # noqa: S105 - a loopback stand-in's fixed token
# What an EKS token starts with (`aws eks get-token`; minted by `gco.reconcile.eks`, checked by the
# stand-in API server's IAM authenticator, `gco.local.assembly.eks`): here so that neither side of the
# stand-in imports the other, nor botocore.
TOKEN_PREFIX = "k8s-aws-v1."  # noqa: S105 - a format prefix, not a secret
