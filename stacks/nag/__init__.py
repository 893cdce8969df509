"""Every cdk-nag suppression, by part of the deployment (the global and runner stacks, the Regional
stack, its add-ons, its Kubernetes plumbing), each one resource path, one rule and one specific
reason (`suppression.Suppression`); `stacks.app` applies them and runs the rule packs.
"""
