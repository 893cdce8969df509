"""What a rounds cell asks a running engine over loopback HTTP: the models it serves and its /metrics text.

Blocking urllib calls with a short timeout; an engine that cannot answer gives None, never an exception.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from pydantic import BaseModel, ConfigDict

HTTP_TIMEOUT_S = 5.0
MODELS_PATH = "/v1/models"
METRICS_PATH = "/metrics"


class ServedModels(BaseModel):
    """The answer to GET /v1/models: the ids listed, or why there are none."""

    model_config = ConfigDict(frozen=True)

    ids: list[str]
    error: str | None = None

    def lists(self, model_id: str) -> bool:
        return model_id in self.ids


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT_S) as response:  # noqa: S310 - loopback
        return bytes(response.read())


def served_models(base_url: str) -> ServedModels:
    """GET /v1/models and read the `data[].id` list (the OpenAI API's answer)."""
    try:
        document = json.loads(_get(base_url + MODELS_PATH))
    except urllib.error.HTTPError as error:
        return ServedModels(ids=[], error=f"GET {MODELS_PATH} answered {error.code}")
    except (urllib.error.URLError, OSError, ValueError) as error:
        return ServedModels(ids=[], error=f"GET {MODELS_PATH}: {error}"[:200])
    entries = document.get("data") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        return ServedModels(ids=[], error=f"GET {MODELS_PATH}: no data list")
    return ServedModels(ids=[str(e["id"]) for e in entries if isinstance(e, dict) and "id" in e])


def scrape_text(base_url: str) -> str | None:
    """GET /metrics as text; None when the engine has none or it cannot be read."""
    try:
        return _get(base_url + METRICS_PATH).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
