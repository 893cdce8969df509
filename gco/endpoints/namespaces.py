"""gco's Kubernetes namespaces, defined once: where endpoints run by default, and gco's own.

The renderers, the reconciler's access grant (`gco.reconcile.access`), the add-ons the Regional stack
installs (`gco.reconcile.addons`) and the CLI's default all import these names.
"""

from __future__ import annotations

# An endpoint's namespace unless its record names another.
DEFAULT_NAMESPACE = "gco-inference"
# gco's own objects in each Region: the shared inference proxy, the routes, Prometheus.
SYSTEM_NAMESPACE = "gco-system"
