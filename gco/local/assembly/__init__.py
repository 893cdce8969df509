"""The synthesized app as the local stack reads it: the cloud assembly's stacks, templates and assets
(`reader`), and each Lambda function and event source mapping the templates declare (`template`).

The local stack runs what `cdk synth` produced, not the source tree: a function's code is its asset
folder, its handler, environment, timeout and concurrency are its template's (docs/local.md).
"""

from gco.local.assembly.reader import AssetManifest, CloudAssembly, StackArtifact
from gco.local.assembly.template import (
    EventSourceMapping,
    LambdaFunction,
    ScheduledRule,
    functions,
    mappings,
    schedules,
)

__all__ = [
    "AssetManifest",
    "CloudAssembly",
    "EventSourceMapping",
    "LambdaFunction",
    "ScheduledRule",
    "StackArtifact",
    "functions",
    "mappings",
    "schedules",
]
