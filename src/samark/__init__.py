"""samark: robust semantic-level watermarking of LLM text (SAMark), with calibrated p-values.

Models load from local folders only; samark sets ``HF_HUB_OFFLINE=1`` unless you set it.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")


from samark.detection_result import Detection
from samark.embed import Embedder, load_embedder, new_key
from samark.errors import (
    EmbedderMismatchError,
    EmptyTextError,
    KeyFileError,
    ModelNotAvailableError,
    SamarkError,
)
from samark.keys import EmbedderIdentity, WatermarkKey
from samark.schemes import Generation, SAMark, Watermark, create_scheme, scheme_names
from samark.schemes.samark.config import SAMarkConfig
from samark.schemes.samark.detector import SAMarkDetector

__version__ = "0.1.0"

__all__ = [
    "Detection",
    "Embedder",
    "EmbedderIdentity",
    "EmbedderMismatchError",
    "EmptyTextError",
    "Generation",
    "KeyFileError",
    "ModelNotAvailableError",
    "SAMark",
    "SAMarkConfig",
    "SAMarkDetector",
    "SamarkError",
    "Watermark",
    "WatermarkKey",
    "create_scheme",
    "load_embedder",
    "new_key",
    "scheme_names",
]
