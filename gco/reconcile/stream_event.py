"""One record of a Lambda DynamoDB-stream event, as the stream handler reads it.

Only what the handler needs: the event's id and name, the item's keys, its images (DynamoDB's typed
attribute values, compared as they are, never deserialized) and the sequence number, which is the
record's identifier in a partial batch response
(https://docs.aws.amazon.com/lambda/latest/dg/services-ddb-batchfailurereporting.html).
A plain pydantic model rather than Powertools' batch utility: importing that utility (and every
event class it pulls in) was a fifth of the stream function's cold import, for a loop of a few
lines (`handler.py`).
"""

# No `from __future__ import annotations` in the modules of pydantic models: pydantic would compile and
# evaluate every string annotation when the models are defined, at each Lambda cold start.

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Image = dict[str, Any]  # attribute name -> typed value, e.g. {"S": "llama"}


class StreamChange(BaseModel):
    """The `dynamodb` part of a stream record."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    keys: Image = Field(default_factory=dict, alias="Keys")
    new_image: Image | None = Field(None, alias="NewImage")
    old_image: Image | None = Field(None, alias="OldImage")
    sequence_number: str | None = Field(None, alias="SequenceNumber")


class StreamRecord(BaseModel):
    """One record of the event's `Records`."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    event_id: str | None = Field(None, alias="eventID")
    event_name: str | None = Field(None, alias="eventName")
    dynamodb: StreamChange | None = None

    @property
    def item_identifier(self) -> str | None:
        """What a partial batch response names this record by: its sequence number."""
        return self.dynamodb.sequence_number if self.dynamodb is not None else None

    def key(self, attribute: str) -> str | None:
        """The item's string key attribute, or None when the record has none."""
        value = (self.dynamodb.keys if self.dynamodb is not None else {}).get(attribute)
        name = value.get("S") if isinstance(value, dict) else None
        return name if isinstance(name, str) and name else None
