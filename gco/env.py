"""Names of the environment variables gco reads, each defined once and imported where it is set or read.

The stacks set them (the Regional reconciler, the GPU runner's container) and the runtime reads them
(`gco.aws`, the endpoint store, the CLI, `gco.reconcile.environment`). Variables of one subsystem
with a model of their own live beside it (`gco.reconcile.addons.ADDONS_ENV`,
`gco.reconcile.proxy.proxy_settings.PROXY_SETTINGS_ENV`, every `*_ENV` constant of gco). No other string
literal of the project's code holds one of these names (`tests/unit/test_names_once.py`).
"""

from __future__ import annotations

# The endpoint table: its name, and its home Region (where every read that decides and every write goes).
TABLE_ENV = "INFERENCE_ENDPOINTS_TABLE_NAME"
DEFAULT_TABLE = "gco-inference-endpoints"
HOME_REGION_ENV = "DYNAMODB_REGION"
# Read after HOME_REGION_ENV, for environments that only set a generic Region.
FALLBACK_REGION_ENV = "REGION"
# The Regional reconciler's cluster, its Region, and how long one record may wait for readiness.
CLUSTER_NAME_ENV = "EKS_CLUSTER_NAME"
RECONCILER_REGION_ENV = "RECONCILER_REGION"
# The Region the AWS SDKs read: set by the Lambda runtime itself (the reconciler's Region when
# RECONCILER_REGION is unset) and by the runner stack for the GPU runner's container.
AWS_REGION_ENV = "AWS_REGION"
# The AWS SDKs' own: every client's endpoint (the local stack's moto server), and the default Region.
ENDPOINT_URL_ENV = "AWS_ENDPOINT_URL"
DEFAULT_REGION_ENV = "AWS_DEFAULT_REGION"
WAIT_SECONDS_ENV = "RECONCILE_WAIT_SECONDS"
# How often the Region's sweep runs (seconds): written into its heartbeat, so readers judge its age.
SWEEP_SECONDS_ENV = "GCO_SWEEP_SECONDS"
# The local stack's stand-in Kubernetes API servers, Region -> URL (JSON); in AWS: EKS clusters by name.
CLUSTER_URLS_ENV = "GCO_CLUSTER_URLS"
# Where `gco matrix run|resume` also writes each checkpoint revision and its evidence (s3://bucket/prefix/).
MATRIX_RUN_URI_ENV = "GCO_MATRIX_RUN_URI"
# The Region's GPU node groups' instance types, comma-separated (the GPU pods' CPU and memory come from them).
GPU_INSTANCE_TYPES_ENV = "GCO_GPU_INSTANCE_TYPES"
# The GPU runner's model token: the Secrets Manager secret (and JSON key) the runner stack names, and
# the variable the runner puts its value in for the engines (Hugging Face's, read by vLLM and TGI).
MODEL_TOKEN_SECRET_ENV = "GCO_MODEL_TOKEN_SECRET"  # noqa: S105 - a variable's name, not a secret
MODEL_TOKEN_KEY_ENV = "GCO_MODEL_TOKEN_KEY"  # noqa: S105 - a variable's name, not a secret
MODEL_TOKEN_ENV = "HF_TOKEN"  # noqa: S105 - a variable's name, not a secret
# The evidence bucket (`gco bench rounds --evidence-bucket`, the GPU runner's jobs and evidence).
EVIDENCE_BUCKET_ENV = "GCO_EVIDENCE_BUCKET"
# The GPU runner's container: the S3 key of its job message, how often it reports to Step Functions,
# and how long it waits for the message to appear.
JOB_KEY_ENV = "GCO_JOB_KEY"
HEARTBEAT_SECONDS_ENV = "GCO_HEARTBEAT_SECONDS"
JOB_WAIT_SECONDS_ENV = "GCO_JOB_WAIT_SECONDS"
# The validation policy (off, warn, enforce) `gco local env` exports for the local stack; it can only
# make the deployment's policy (its SSM parameter, `gco.admission.policy`) stricter, never weaker.
VALIDATION_POLICY_ENV = "GCO_VALIDATION_POLICY"
# The local stack's registry stand-in: a JSON file of tag -> digest (`gco.admission.images`).
LOCAL_REGISTRY_ENV = "GCO_LOCAL_REGISTRY"
