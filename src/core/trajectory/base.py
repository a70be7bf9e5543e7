"""What every record of the on-disk format shares: a schema version and strict fields."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

__all__ = ["Record"]


class Record(BaseModel):
    """Base of the versioned records.

    Each subclass declares ``schema_version: int = <current>``. A file written by a newer
    program (a higher version) is refused with a clear message rather than half understood;
    older versions load, with newer fields taking their defaults. Unknown fields are
    refused too, so a typo never silently drops data. Field docstrings become the fields'
    descriptions in the JSON schema.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    schema_version: int = 1

    @field_validator("schema_version")
    @classmethod
    def _known_version(cls, value: int) -> int:
        current: Any = cls.model_fields["schema_version"].default
        if value < 1:
            raise ValueError(f"schema_version must be >= 1, not {value}")
        if value > current:
            raise ValueError(
                f"{cls.__name__} schema {value} is newer than this program's {current}; "
                "upgrade agent-s3 to read it"
            )
        return value
