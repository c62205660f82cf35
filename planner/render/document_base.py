"""The base of every `--json` document (documents.py, search_documents.py, train_documents.py): frozen, strict,
and ``as_json()``, the dict `--json` writes: the fields in declared order, with the optional sections (`train`,
`checkpoint`, `goodput`, `closest_misses`, `would_fit`, ...: OPTIONAL) left out when a command did not compute
them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

OPTIONAL = (
    "train", "checkpoint", "goodput", "goodput_tokens_per_s", "closest_misses", "active_params", "global_batch_default",
    "seq_len_default", "derived_degrees", "would_fit",
)  # fmt: skip


class Document(BaseModel):
    # defer_build: a document's validator is built when one is first made, so a command builds only its own
    # (about 25 ms of start-up for the fifteen classes)
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    def as_json(self) -> dict[str, Any]:
        """The JSON document: every field, except the optional sections that are absent."""
        absent = {k for k in OPTIONAL if k in type(self).model_fields and getattr(self, k) is None}
        return self.model_dump(exclude=absent)
