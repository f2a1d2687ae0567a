"""What each reader says of a C2PA 2.4 unstructured-text hard binding, two ways signed:
A) as samark signs (the hash over the text without its wrapper, no exclusion declared);
B) as C2PA 2.4 A.8 says (the same hash, the wrapper's byte range declared as the exclusion).

Readers: the CAI library in c2pa-python (c2pa-rs), samark's check, and a strict A.8 hard
binding check (c2pa-unstructured-text, unpacked outside the environment, not a dependency).

    pip download --no-deps -d /tmp/cut c2pa-unstructured-text==0.2.0
    (cd /tmp/cut && mkdir -p pkg && cd pkg && unzip -qo ../*.whl)
    PYTHONPATH=src:tests:/tmp/cut/pkg python docs/results/2026-12-05-c2pa-exclusion/probe.py \
        > docs/results/2026-12-05-c2pa-exclusion/probe.jsonl
"""

from __future__ import annotations

import hashlib
import io
import json
import tempfile
import unicodedata
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import c2pa
import c2pa_text
import c2pa_unstructured_text as strict

from c2pa_pki import throwaway_pki
from samark.provenance.c2pa_manifest import (
    _READ_FORMAT,
    _SIGN_FORMAT,
    ManifestSigner,
    ManifestVerifier,
)
from samark.provenance.c2pa_native import placeholder_size, sign_data_hashed
from test_c2pa import TEXT


def say(**row: Any) -> None:
    print(json.dumps(row))


def cai_failures(verifier: ManifestVerifier, asset: bytes, store: bytes) -> list[list[str]]:
    reader = c2pa.Reader(
        _READ_FORMAT, io.BytesIO(asset), manifest_data=store, context=verifier._context
    )
    with reader:
        results = reader.get_validation_results() or {}
    failures = (results.get("activeManifest") or {}).get("failure", [])
    return [[str(f.get("code")), str(f.get("explanation"))] for f in failures]


def strict_verdict(text: str, digest: bytes, exclusions: list[tuple[int, int]]) -> str:
    try:
        strict.verify_data_hash(text, digest, exclusions)
    except ValueError as error:
        return str(error)
    return "ok"


def main() -> None:
    pki = throwaway_pki(Path(tempfile.mkdtemp()), "operator")
    signer = ManifestSigner.from_files(pki["chain"], pki["key"])
    verifier = ManifestVerifier.from_files([pki["root"]])
    say(
        c2pa_python="0.38.1",
        c2pa_rs=c2pa.sdk_version(),
        c2pa_text=c2pa_text.__version__ if hasattr(c2pa_text, "__version__") else "3.0.0",
        c2pa_unstructured_text="0.2.0",
        cai_reads_text_plain="text/plain" in c2pa.Reader.get_supported_mime_types(),
    )
    body = unicodedata.normalize("NFC", TEXT)
    data = body.encode()
    digest = hashlib.sha256(data).digest()

    # A) as samark signs
    signed = signer.sign(TEXT, model="m")
    store, _, _ = c2pa_text.find_wrapper_info(signed)
    expected = strict.compute_data_hash(signed)
    say(
        case="A samark (no exclusion declared)",
        samark_check=verifier.check(signed).state,
        cai_on_text_without_wrapper=cai_failures(verifier, data, store),
        strict_a8=strict_verdict(signed, digest, []),
        strict_a8_expects_exclusions=[list(e) for e in expected["exclusions"]],
        strict_a8_expected_hash_equals_declared=expected["hash"] == digest,
    )

    # B) as A.8 says: the wrapper's range declared (padded to its deterministic length)
    builder = c2pa.Builder(json.dumps(signer.definition("m", None, datetime.now(timezone.utc))))
    info = c2pa.C2paSignerInfo(
        alg=b"es256", sign_cert=signer.cert_chain, private_key=signer.key, ta_url=None
    )
    sig = c2pa.Signer.from_info(info)
    size = placeholder_size(builder, sig, _SIGN_FORMAT)
    target = c2pa_text.worst_case_wrapper_byte_length(size)
    data_hash = {
        "name": "jumbf manifest",
        "alg": "sha256",
        "hash": list(digest),
        "exclusions": [{"start": len(data), "length": target}],
        "pad": [],
    }
    store = sign_data_hashed(builder, sig, data_hash, _SIGN_FORMAT)
    builder.close()
    sig.close()
    text = body + c2pa_text.encode_wrapper_padded(store, target)
    say(
        case="B C2PA 2.4 A.8 (the wrapper's range declared)",
        wrapper_bytes=len(text.encode()) - len(data),
        declared_exclusion=[len(data), target],
        cai_on_whole_text=cai_failures(verifier, text.encode(), store),
        cai_on_text_without_wrapper=cai_failures(verifier, data, store),
        strict_a8=strict_verdict(text, digest, [(len(data), target)]),
    )


if __name__ == "__main__":
    main()
