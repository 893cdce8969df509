"""The global stack (home Region) and the per-Region key stacks its table replicas need."""

from __future__ import annotations

from aws_cdk import Stack
from constructs import Construct

from stacks.config import GcoConfig
from stacks.data import EndpointTable, EvidenceBucket, replica_key_alias, table_key


class KeysStack(Stack):
    """A Regional Region's table key, deployed before the global stack so its replica can use it."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GcoConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.key = table_key(
            self,
            "TableKey",
            prefix=config.prefix,
            description=f"{config.prefix}: endpoint table replica in {self.region}",
        )


class GlobalStack(Stack):
    """The endpoint table (and its replicas) and the evidence bucket."""

    def __init__(self, scope: Construct, construct_id: str, *, config: GcoConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.table_key = table_key(
            self,
            "TableKey",
            prefix=config.prefix,
            description=f"{config.prefix}: endpoint table and evidence",
        )
        replica_key_arns = {
            region: self.format_arn(service="kms", region=region, resource=replica_key_alias(config.prefix))
            for region in config.replica_regions
        }
        self.endpoints = EndpointTable(
            self,
            "Endpoints",
            table_name=config.table_name,
            key=self.table_key,
            replica_regions=config.replica_regions,
            replica_key_arns=replica_key_arns,
        )
        self.evidence = EvidenceBucket(
            self, "Evidence", key=self.table_key, retention_days=config.evidence_retention_days
        )
