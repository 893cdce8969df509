"""gco's CDK app: constructs for units, stacks for deployment units (the only package importing aws_cdk)."""
