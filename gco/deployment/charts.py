"""The Helm charts the Regional stacks install, each pinned once, with the Kubernetes versions its
own project documents support for.

The config model refuses a `kubernetes_version` outside the documented range of a chart the
deployment installs (`unsupported`), and the stacks read the chart and app versions from here, so
the pin and its support range cannot drift apart. A range with no upper bound is what the project
documents: a minimum only (its chart's `kubeVersion` and its README), not a tested window.

Each row's source, as read on the project's own pages (dates are the releases'):

- NVIDIA device plugin 0.20.0 (2026-08-19): NVIDIA/k8s-device-plugin README, "Prerequisites":
  "Kubernetes version >= 1.10"; its chart's `kubeVersion: ">= 1.10.0-0"`.
- Cluster Autoscaler chart 9.59.0 (2026-07-21, app 1.35.0): kubernetes/autoscaler
  `cluster-autoscaler/charts/cluster-autoscaler/README.md`, "Prerequisites": "Kubernetes 1.8+". The
  chart's image is not its app version: the stacks set the autoscaler release of the cluster's
  own minor version (`gco.deployment.kubernetes.CLUSTER_AUTOSCALER_TAGS`).
- KEDA 2.20.2 (2026-07-31): keda.sh/docs/2.20/operate/cluster, "Kubernetes Compatibility"
  (kedacore/keda-docs `content/docs/2.20/operate/cluster.md`): "v2.20 | v1.33 - v1.35", the
  Kubernetes versions each KEDA release is tested against ("N-2"). The 2.21 page lists 2.21 as "TBD"
  and 2.20 is the newest release: no KEDA release documents 1.36.
- Prometheus chart 29.27.0 (app v3.14.0): prometheus-community/helm-charts `charts/prometheus`
  README, "Prerequisites": "Kubernetes 1.19+"; `kubeVersion: ">=1.19.0-0"`.
- DCGM exporter chart 4.8.2 (2026-05-06, image 4.5.3-4.8.2): NVIDIA/dcgm-exporter
  `deployment/Chart.yaml`, `kubeVersion: ">= 1.19.0-0"`.
- AWS Load Balancer Controller chart 3.5.0 (app v3.5.0, 2026-08-03): aws/eks-charts
  `stable/aws-load-balancer-controller/README.md`, "Prerequisites": "Chart version v1.5.0+ requires
  Kubernetes 1.22+" (the controller's docs, `docs/deploy/installation.md`: "v2.5.0+ requires
  Kubernetes 1.22+"); the release is built against the Kubernetes 1.36 client (`k8s.io/api v0.36.2`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gco.reconcile import addons

# The load balancer controller belongs to the front door (stacks/constructs/ingress.py), not to
# gco.reconcile.addons' set of add-ons the reconciler is told about; its chart is pinned here with the others.
LOAD_BALANCER_CONTROLLER = "aws-load-balancer-controller"


def _minor(version: str) -> int:
    """The minor number of a `1.NN` Kubernetes version."""
    major, minor = version.split(".")
    if major != "1":
        raise ValueError(f"{version!r} is not a Kubernetes 1.x version")
    return int(minor)


@dataclass(frozen=True)
class ChartRelease:
    """One pinned chart: where it comes from, its chart and app versions, and the Kubernetes minor
    versions its project documents (`kubernetes_max` None: the project states a minimum only)."""

    repository: str
    chart: str
    version: str
    app_version: str
    kubernetes_min: str
    kubernetes_max: str | None
    source: str

    def supports(self, kubernetes_version: str) -> bool:
        """Whether `kubernetes_version` (`1.NN`) is inside the documented range.

        Raises:
            ValueError: a version (the one asked or the chart's own) is not `1.NN`.
        """
        minor = _minor(kubernetes_version)
        if minor < _minor(self.kubernetes_min):
            return False
        return self.kubernetes_max is None or minor <= _minor(self.kubernetes_max)

    @property
    def support_range(self) -> str:
        """The documented range in words: `1.33-1.35`, or `1.22 and newer`."""
        if self.kubernetes_max is None:
            return f"{self.kubernetes_min} and newer"
        return f"{self.kubernetes_min}-{self.kubernetes_max}"


CHART_RELEASES: dict[str, ChartRelease] = {
    addons.DEVICE_PLUGIN: ChartRelease(
        "https://nvidia.github.io/k8s-device-plugin", "nvidia-device-plugin", "0.20.0", "0.20.0",
        "1.10", None, "NVIDIA/k8s-device-plugin README, Prerequisites: Kubernetes version >= 1.10",
    ),
    addons.CLUSTER_AUTOSCALER: ChartRelease(
        "https://kubernetes.github.io/autoscaler", "cluster-autoscaler", "9.59.0", "1.35.0",
        "1.8", None, "kubernetes/autoscaler cluster-autoscaler chart README, Prerequisites: Kubernetes 1.8+",
    ),
    addons.KEDA: ChartRelease(
        "https://kedacore.github.io/charts", "keda", "2.20.2", "2.20.2",
        "1.33", "1.35", "keda.sh/docs/2.20/operate/cluster, Kubernetes Compatibility: v2.20 | v1.33 - v1.35",
    ),
    addons.PROMETHEUS: ChartRelease(
        "https://prometheus-community.github.io/helm-charts", "prometheus", "29.27.0", "v3.14.0",
        "1.19", None, "prometheus-community/helm-charts charts/prometheus README: Kubernetes 1.19+",
    ),
    addons.DCGM_EXPORTER: ChartRelease(
        "https://nvidia.github.io/dcgm-exporter/helm-charts", "dcgm-exporter", "4.8.2", "4.8.2",
        "1.19", None, "NVIDIA/dcgm-exporter deployment/Chart.yaml: kubeVersion >= 1.19.0-0",
    ),
    LOAD_BALANCER_CONTROLLER: ChartRelease(
        "https://aws.github.io/eks-charts", "aws-load-balancer-controller", "3.5.0", "v3.5.0",
        "1.22", None, "aws/eks-charts aws-load-balancer-controller README: v1.5.0+ requires Kubernetes 1.22+",
    ),
}  # fmt: skip

# Every Region installs these; the scaling charts (`gco.reconcile.addons.SCALING_ADDONS`) only where config
# enables KEDA.
BASE_CHARTS = (addons.DEVICE_PLUGIN, addons.CLUSTER_AUTOSCALER, LOAD_BALANCER_CONTROLLER)


def installed_charts(scaling: bool) -> tuple[str, ...]:
    """The charts a Region installs: the base ones, and KEDA, Prometheus and the DCGM exporter with
    `scaling`."""
    return (*BASE_CHARTS, *(addons.SCALING_ADDONS if scaling else ()))


def unsupported(kubernetes_version: str, names: Iterable[str]) -> list[str]:
    """The charts among `names` whose documented range leaves `kubernetes_version` out."""
    return [name for name in names if not CHART_RELEASES[name].supports(kubernetes_version)]
