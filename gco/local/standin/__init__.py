"""The stand-in Kubernetes API server of the local stack and the tests (`api.py` says what it models)."""

from gco.local.standin.api import RECONCILER_USER, RUNNER_IDENTITY, RUNNER_USER, StandInKubeAPI
from gco.local.standin.faults import Fault, FaultQueue
from gco.local.standin.server import Identity
from gco.local.standin.store import PREEXISTING_NAMESPACES, ObjectStore, ReplicaSource

__all__ = [
    "PREEXISTING_NAMESPACES",
    "RECONCILER_USER",
    "RUNNER_IDENTITY",
    "RUNNER_USER",
    "Fault",
    "FaultQueue",
    "Identity",
    "ObjectStore",
    "ReplicaSource",
    "StandInKubeAPI",
]
