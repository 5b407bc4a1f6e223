"""The Slurm bridge's settings (context ``osprey:slurm``, a JSON object), validated at ``cdk synth``.

Example (cdk.json ``context`` or ``-c osprey:slurm='{...}'``)::

    "osprey:slurm": {
      "clusterName": "training",                      # the ParallelCluster name (slurm.conf ClusterName)
      "url": "https://10.0.1.23:6820",                # slurmrestd (behind its TLS proxy) on the head node
      "vpcId": "vpc-0abc...", "subnetIds": ["subnet-0abc..."],
      "tokenSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:slurm-jwt-AbCdEf",
      "user": "slurm",                                # the JWT's user, unless the secret names one
      "headNodeSecurityGroupId": "sg-0abc...",        # optional: open slurmrestd's port to the bridge
      "priorityRange": "1..10001",                    # optional (docs/slurm.md)
      "discoveryMinutes": 1,                          # optional
      "instanceClusterTag": "",                       # optional: "" looks instances up without the tag
      "caCertificate": "-----BEGIN CERTIFICATE-----...", # optional: the CA of slurmrestd's certificate (PEM)
      "insecureHttp": false,                          # optional: true allows an http:// url (token in clear)
      "allowSigningKey": false,                       # optional: true accepts a jwt_hs256.key secret
      "maxResponseBytes": 67108864                    # optional: the largest slurmrestd answer read
    }
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from osprey_control.backends.slurm import MAX_RESPONSE_BYTES, SlurmPriorityRange

__all__ = ["SlurmBridgeConfig"]

# The CA goes into the bridge's environment, whose variables share 4 KB: one certificate (1-2 KB) fits.
_CA_PEM_LIMIT = 2600


class SlurmBridgeConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    cluster_name: str = Field(alias="clusterName", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,59}$")
    # Before ``url``: its validator reads it (pydantic validates fields in this order).
    insecure_http: bool = Field(default=False, alias="insecureHttp")
    url: str = Field(pattern=r"^https?://[^/\s:]+(:\d{1,5})?/?$")
    vpc_id: str = Field(alias="vpcId", pattern=r"^vpc-[0-9a-f]{8,17}$")
    subnet_ids: tuple[str, ...] = Field(alias="subnetIds", min_length=1, max_length=16)
    token_secret_arn: str = Field(
        alias="tokenSecretArn",
        pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[\w/+=.@-]+$",
    )
    user: str = Field(default="slurm", pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    head_node_security_group_id: str | None = Field(
        default=None, alias="headNodeSecurityGroupId", pattern=r"^sg-[0-9a-f]{8,17}$"
    )
    priority_range: str = Field(default="1..10001", alias="priorityRange")
    discovery_minutes: int = Field(default=1, alias="discoveryMinutes", ge=1, le=60)
    # The parallelcluster:cluster-name value that scopes the node -> instance lookup: None means clusterName,
    # "" no tag filter (HyperPod, or a cluster that is not ParallelCluster's).
    instance_cluster_tag: str | None = Field(
        default=None, alias="instanceClusterTag", pattern=r"^[A-Za-z0-9-]{0,60}$"
    )

    ca_certificate: str | None = Field(default=None, alias="caCertificate", max_length=_CA_PEM_LIMIT)
    allow_signing_key: bool = Field(default=False, alias="allowSigningKey")
    max_response_bytes: int = Field(
        default=MAX_RESPONSE_BYTES, alias="maxResponseBytes", ge=1024, le=1024 * 1024 * 1024
    )

    @field_validator("url")
    @classmethod
    def _tls(cls, value: str, info: ValidationInfo) -> str:
        if value.startswith("http://") and not info.data.get("insecure_http"):
            raise ValueError(
                "plain http:// sends the slurmrestd JWT in clear across the VPC: put slurmrestd behind a TLS "
                'proxy and use https:// (docs/slurm.md), or set "insecureHttp": true to accept that'
            )
        return value

    @field_validator("ca_certificate")
    @classmethod
    def _pem(cls, value: str | None) -> str | None:
        if value is not None and not value.lstrip().startswith("-----BEGIN CERTIFICATE-----"):
            raise ValueError(
                "must be one PEM certificate (-----BEGIN CERTIFICATE----- ... -----END CERTIFICATE-----)"
            )
        return value

    @property
    def instance_tag(self) -> str:
        return self.cluster_name if self.instance_cluster_tag is None else self.instance_cluster_tag

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for subnet in value:
            if not re.fullmatch(r"subnet-[0-9a-f]{8,17}", subnet):
                raise ValueError(f"{subnet!r} is not a subnet id (subnet-...)")
        return value

    @field_validator("priority_range")
    @classmethod
    def _range(cls, value: str) -> str:
        SlurmPriorityRange.parse(value)
        return value

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 6820)

    @classmethod
    def from_context(cls, raw: Any) -> SlurmBridgeConfig:
        import json  # noqa: PLC0415

        return cls.model_validate(json.loads(raw) if isinstance(raw, str) else raw)
