"""Run one Lambda handler from a built bundle, as the Lambda runtime would: nothing else on the path.

Started by test_bundle_imports.py as `python -I -S bundle_driver.py <config JSON>` (no site-packages, no
PYTHON* variables, not even this file's folder on the path). The import path is the bundle, then a
folder standing in for the runtime's AWS SDK, then the standard library. The only thing replaced is the
EKS connection (no EKS here): the reconciler reaches a stand-in Kubernetes API instead. Prints one JSON
line: the handler's response and every module file loaded from outside the bundle, SDK and stdlib.
"""

import json
import sys
import sysconfig
from typing import Any


class Context:
    function_name = "gco-reconciler-stream"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:gco-reconciler-stream"
    memory_limit_in_mb = 512
    aws_request_id = "00000000-0000-0000-0000-000000000001"
    log_group_name = "/aws/lambda/gco-reconciler-stream"
    log_stream_name = "stream"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


def main() -> None:
    config = json.loads(sys.argv[1])
    stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    sys.path[:] = [config["bundle"], config["runtime"], *[p for p in sys.path if p.startswith(tuple(stdlib))]]
    # The handler module is named at run time; the reconciler it reads is replaced below.
    module: Any = __import__(config["handler"])
    tracer_at_import = "aws_xray_sdk" in sys.modules

    from gco.endpoints.store import EndpointStore
    from gco.reconcile.kubeapi import KubeCluster, RetryPolicy, static_token
    from gco.reconcile.reconciler import Reconciler
    from gco.reconcile.runtime import LazyReconciler

    def build() -> Reconciler:
        store = EndpointStore.connect(table_name=config["table"])
        retry = RetryPolicy(attempts=3, base_delay=0.01, max_delay=0.1)
        cluster = KubeCluster(config["kube"], static_token(config["token"]), timeout=5.0, retry=retry)
        return Reconciler(store, cluster, config["region"], wait=5.0, poll=0.05)

    module.reconciler = LazyReconciler(build)
    with open(config["event"], encoding="utf-8") as source:
        event = json.load(source)
    response = module.handler(event, Context())
    roots = (config["bundle"], config["runtime"], *stdlib)
    foreign = sorted(
        {
            f"{name}: {getattr(m, '__file__', None)}"
            for name, m in list(sys.modules.items())
            if name not in ("__main__", "__mp_main__")
            and getattr(m, "__file__", None)
            and not str(m.__file__).startswith(roots)
        }
    )
    patched = sorted(
        name.split(".")[2]
        for name in sys.modules
        if name.startswith("aws_xray_sdk.ext.") and name.endswith(".patch")
    )
    print(
        json.dumps(
            {
                "response": response,
                "foreign": foreign,
                "tracer_at_import": tracer_at_import,
                "tracer": "aws_xray_sdk" in sys.modules,
                "patched": patched,
            }
        )
    )


if __name__ == "__main__":
    main()
