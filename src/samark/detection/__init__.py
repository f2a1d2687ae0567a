"""Detection beyond one text and one key: against a keyring (``ring``), over JSONL and
Parquet records (``records``) or a Ray Dataset (``ray``), and a key's false-positive
rate on a domain's human text (``key_check``). The typed result of one detection is
:class:`Detection` (:mod:`samark.detection_result`, which the schemes import; it is
re-exported here)."""

from samark.detection_result import Detection

__all__ = ["Detection"]
