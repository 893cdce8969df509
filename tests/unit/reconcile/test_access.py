"""The reconciler's grant and the runner's read-only one: what each allows, and their RBAC objects."""

from __future__ import annotations

import kubernetes_validate
import pytest

from gco.reconcile.access import (
    ENDPOINT_KINDS,
    RECONCILER_GRANT,
    RECONCILER_GROUP,
    RECONCILER_RBAC_NAME,
    RUNNER_GRANT,
    RUNNER_GROUP,
    RUNNER_RBAC_NAME,
    Rule,
    reconciler_grant,
)
from gco.reconcile.objects import CONFIG_MAP, DEPLOYMENT, INGRESS, KINDS, PDB, SCALED_OBJECT, SERVICE
from tests.unit.reconcile.test_render import K8S_VERSION

INFERENCE, SYSTEM = "gco-inference", "gco-system"


@pytest.mark.parametrize("verb", ["get", "list", "create", "patch", "delete"])
def test_endpoint_kinds_are_granted_in_the_endpoint_namespace(verb: str) -> None:
    for kind in (DEPLOYMENT, SERVICE, SCALED_OBJECT, PDB):
        assert RECONCILER_GRANT.allows(verb, kind.group, kind.plural, INFERENCE, "llama")


def test_nothing_cluster_wide_but_its_own_namespaces_by_name() -> None:
    for kind in KINDS:
        assert not RECONCILER_GRANT.allows("list", kind.group, kind.plural, None, None)
    assert RECONCILER_GRANT.allows("patch", "", "namespaces", None, INFERENCE)
    assert RECONCILER_GRANT.allows("create", "", "namespaces", None, INFERENCE)  # an apply that creates it
    assert not RECONCILER_GRANT.allows("create", "", "namespaces", None, None)  # a POST: no name
    assert RECONCILER_GRANT.allows("get", "", "namespaces", None, SYSTEM)
    assert not RECONCILER_GRANT.allows("patch", "", "namespaces", None, "kube-system")
    assert not RECONCILER_GRANT.allows("list", "", "namespaces", None, None)  # resourceNames: never a list
    assert not RECONCILER_GRANT.allows("delete", "", "namespaces", None, INFERENCE)


def test_kinds_only_where_they_live_and_no_other_verbs() -> None:
    assert RECONCILER_GRANT.allows("patch", INGRESS.group, INGRESS.plural, SYSTEM, "route-llama")
    assert not RECONCILER_GRANT.allows("patch", INGRESS.group, INGRESS.plural, INFERENCE, "route-llama")
    assert RECONCILER_GRANT.allows("patch", CONFIG_MAP.group, CONFIG_MAP.plural, SYSTEM, "x")
    assert not RECONCILER_GRANT.allows("patch", CONFIG_MAP.group, CONFIG_MAP.plural, INFERENCE, "x")
    assert not RECONCILER_GRANT.allows("list", "", "secrets", INFERENCE, None)
    assert not RECONCILER_GRANT.allows("watch", DEPLOYMENT.group, DEPLOYMENT.plural, INFERENCE, None)
    assert not RECONCILER_GRANT.allows(
        "deletecollection", DEPLOYMENT.group, DEPLOYMENT.plural, INFERENCE, None
    )
    assert not RECONCILER_GRANT.allows("get", DEPLOYMENT.group, DEPLOYMENT.plural, "default", "x")
    assert not RECONCILER_GRANT.allows("update", DEPLOYMENT.group, DEPLOYMENT.plural, INFERENCE, "x")


@pytest.mark.parametrize("subresource", ["status", "scale"])
def test_a_subresource_is_its_own_resource(subresource: str) -> None:
    """RBAC matches `deployments/status` only by that entry: `deployments` grants none of it."""
    for verb in ("get", "patch", "update"):
        resource = f"{DEPLOYMENT.plural}/{subresource}"
        assert not RECONCILER_GRANT.allows(verb, DEPLOYMENT.group, resource, INFERENCE, "llama")
    rule = Rule(("apps",), ("deployments/scale",), ("patch",))
    assert rule.allows("patch", "apps", "deployments/scale", "llama")
    assert not rule.allows("patch", "apps", "deployments", "llama")


def test_list_scopes_follow_the_grant() -> None:
    scopes = set(RECONCILER_GRANT.list_scopes(KINDS))
    assert (INFERENCE, SCALED_OBJECT) in scopes
    assert (SYSTEM, INGRESS) in scopes
    assert (INFERENCE, INGRESS) not in scopes
    assert (SYSTEM, SCALED_OBJECT) not in scopes
    grant = reconciler_grant(["team-a", "team-b"])
    assert grant.namespaces == ("team-a", "team-b", SYSTEM)


def test_endpoint_objects_are_listed_in_the_endpoint_namespaces_and_the_system_routes_only() -> None:
    objects = set(RECONCILER_GRANT.object_scopes(KINDS))
    assert objects <= set(RECONCILER_GRANT.list_scopes(KINDS))
    assert {(INFERENCE, kind) for kind in ENDPOINT_KINDS} | {(SYSTEM, INGRESS)} == objects
    assert (SYSTEM, DEPLOYMENT) not in objects  # the proxy's: never an endpoint's
    grant = reconciler_grant(["team-a", "team-b"])
    assert {namespace for namespace, _ in grant.object_scopes(KINDS)} == {"team-a", "team-b", SYSTEM}


def test_rbac_objects_are_valid_and_bound_to_the_access_entry_group() -> None:
    objects = RECONCILER_GRANT.rbac_objects()
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    kinds = sorted(obj["kind"] for obj in objects)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "Role", "Role", "RoleBinding", "RoleBinding"]
    for binding in (obj for obj in objects if obj["kind"].endswith("Binding")):
        assert binding["subjects"] == [
            {"kind": "Group", "name": RECONCILER_GROUP, "apiGroup": "rbac.authorization.k8s.io"}
        ]
    cluster_role = next(obj for obj in objects if obj["kind"] == "ClusterRole")
    assert cluster_role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["get", "create", "patch"],
            "resourceNames": [INFERENCE, SYSTEM],
        }
    ]
    verbs = {
        verb for obj in objects if obj["kind"] == "Role" for rule in obj["rules"] for verb in rule["verbs"]
    }
    assert verbs == {"get", "list", "create", "patch", "delete"}


def test_a_rule_with_resource_names_needs_a_name() -> None:
    rule = Rule(("",), ("namespaces",), ("get", "list", "create"), ("a",))
    assert rule.allows("get", "", "namespaces", "a")
    assert rule.allows("create", "", "namespaces", "a")  # an apply's create check carries the name
    assert not rule.allows("get", "", "namespaces", None)
    assert not rule.allows("get", "", "namespaces", "b")
    assert not rule.allows("list", "", "namespaces", None)  # a list never names one object
    assert not rule.allows("create", "", "namespaces", None)  # nor does a POST


def test_the_runner_reads_every_scope_the_reconciler_writes_and_writes_nothing() -> None:
    assert RUNNER_GRANT.group == RUNNER_GROUP != RECONCILER_GROUP
    assert set(RUNNER_GRANT.list_scopes(KINDS)) == set(RECONCILER_GRANT.list_scopes(KINDS))
    for namespace in RECONCILER_GRANT.namespaces:
        for kind in RECONCILER_GRANT.kinds_in(namespace):
            assert RUNNER_GRANT.allows("list", kind.group, kind.plural, namespace, None)
            assert RUNNER_GRANT.allows("get", kind.group, kind.plural, namespace, "llama")
            for verb in ("patch", "delete", "create", "update", "watch", "deletecollection"):
                assert not RUNNER_GRANT.allows(verb, kind.group, kind.plural, namespace, "llama")
    assert not RUNNER_GRANT.allows("list", DEPLOYMENT.group, DEPLOYMENT.plural, None, None)  # cluster-wide
    assert not RUNNER_GRANT.allows("get", "", "namespaces", None, INFERENCE)
    assert not RUNNER_GRANT.allows("list", "", "secrets", INFERENCE, None)
    assert not RUNNER_GRANT.allows("get", DEPLOYMENT.group, DEPLOYMENT.plural, "kube-system", "coredns")


def test_the_runner_rbac_is_roles_only_bound_to_its_own_group() -> None:
    objects = RUNNER_GRANT.rbac_objects()
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    assert sorted((o["kind"], o["metadata"]["namespace"]) for o in objects) == [
        ("Role", INFERENCE), ("Role", SYSTEM), ("RoleBinding", INFERENCE), ("RoleBinding", SYSTEM),
    ]  # fmt: skip
    assert {o["metadata"]["name"] for o in objects} == {RUNNER_RBAC_NAME}
    for binding in (o for o in objects if o["kind"] == "RoleBinding"):
        assert binding["subjects"][0]["name"] == RUNNER_GROUP
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": RUNNER_RBAC_NAME,
        }
    verbs = {verb for o in objects if o["kind"] == "Role" for rule in o["rules"] for verb in rule["verbs"]}
    assert verbs == {"get", "list"}
    names = {o["metadata"]["name"] for o in RECONCILER_GRANT.rbac_objects()}
    assert names == {RECONCILER_RBAC_NAME} != {RUNNER_RBAC_NAME}  # the two grants' objects never collide
