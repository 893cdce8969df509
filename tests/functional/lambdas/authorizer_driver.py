"""Run the global authorizer from a built bundle, as the Lambda runtime would: nothing else on the path.

Started by test_bundle_imports.py as `python -I -S authorizer_driver.py <config JSON>`, like
`bundle_driver.py`, with nothing replaced: the handler reads the keys and endpoint tables of the
moto server named by AWS_ENDPOINT_URL. Calls the handler once per event and prints one JSON line:
each answer (or the error's type and message), the modules loaded from outside the bundle, SDK and
stdlib, and which heavy packages the handler loaded (its cold start should need none of them).
"""

import json
import sys
import sysconfig
from typing import Any

# pydantic too: the keys and the endpoint's serving fields are read without models
# (gco.global_access.keys.ApiKey, gco.endpoints.serving), the models being most of the cold start.
HEAVY = ("aws_lambda_powertools", "aws_xray_sdk", "httpx", "boto3", "pydantic")


def main() -> None:
    config = json.loads(sys.argv[1])
    stdlib = [sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"]]
    sys.path[:] = [config["bundle"], config["runtime"], *[p for p in sys.path if p.startswith(tuple(stdlib))]]
    module: Any = __import__("authorizer")
    answers: list[Any] = []
    for event in config["events"]:
        try:
            answers.append(module.handler(event, None))
        except Exception as error:  # the Lambda runtime reports any exception; so does this
            answers.append({"error": type(error).__name__, "message": str(error)})
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
    heavy = sorted(name for name in HEAVY if name in sys.modules)
    print(json.dumps({"answers": answers, "foreign": foreign, "heavy": heavy}))


if __name__ == "__main__":
    main()
