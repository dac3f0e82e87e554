"""The ``[knowledge_bases.<id>]`` keys of kind ``bedrock``: the options model the plugin
registers, so the core validates them and reports errors like its own (file, key, fix).
No boto3 here: the plugin module imports this on every ``kairox`` start."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

KB_ID_PATTERN = re.compile(
    r"^[0-9a-zA-Z]{10}$|^arn:aws(-[^:]+)?:bedrock:[a-z0-9-]{1,20}:[0-9]{12}:"
    r"knowledge-base/[0-9a-zA-Z]{10}$"
)


class BedrockOptions(BaseModel):
    """One Bedrock knowledge base; AWS credentials come from the usual AWS chain."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    knowledge_base_id: str
    region: str | None = None  # else AWS_REGION / the profile's region
    profile: str | None = None  # a named profile of ~/.aws/config
    endpoint_url: str | None = None  # a VPC endpoint, or a local test server
    search_type: Literal["HYBRID", "SEMANTIC"] | None = None  # None: the service chooses
    max_attempts: int = Field(3, ge=1)  # botocore's total attempts (its standard default)
    overfetch: int = Field(2, ge=1)  # chunks asked per wanted document (best chunk kept)

    @field_validator("knowledge_base_id")
    @classmethod
    def _kb_id(cls, value: str) -> str:
        if not KB_ID_PATTERN.match(value):
            raise ValueError(
                f"{value!r} is not a Bedrock knowledge base id (10 letters/digits, "
                "e.g. 'ABCDE12345', or its ARN)"
            )
        return value

    @field_validator("search_type", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value
