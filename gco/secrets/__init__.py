"""Secrets for endpoint pods: the references an endpoint spec names and their one AWS adapter.

`endpoint_secrets` (pure) holds what is stored (a secret's name or ARN and JSON key, never a value),
the allowed list and the Kubernetes Secret built from the values; `secrets_manager` reads those values
from AWS Secrets Manager for the Regional reconciler. The reconciler, the deployment settings, the
stacks and the local stack use them. Their errors are drawn in `gco/errors.py`.
"""
