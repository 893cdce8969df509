"""gco's CDK app, the only package importing aws_cdk: the deployment units and how they are wired.

At the top, the stacks (`global_stack` with the keys stack, `regional`, `runner`), the app that wires
them from the `gco` context (`app`, `config`) and the Lambda bundle (`bundling`, `handler_imports`).
Below them, `constructs`: the logical units a stack composes (the table, the evidence bucket, the
front door, the reconciler, the cluster's access, add-ons and node groups, the runner's workflow
and clean-up, roles and keys), each with keyword-only properties; and `nag`: every cdk-nag
suppression, one resource path, one rule, one reason.
"""
