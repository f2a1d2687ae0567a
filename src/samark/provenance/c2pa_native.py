"""The two calls of the CAI library that c2pa-python 0.38 ships but does not wrap.

Text is not a format the CAI library can open (``c2pa.Builder.get_supported_mime_types()``
has no ``text/plain``), so a manifest for text is signed the way C2PA 2.4 binds
unstructured text: a ``c2pa.hash.data`` hard binding over the text's bytes, with the
manifest's own wrapper excluded. The library does this in
``c2pa_builder_data_hashed_placeholder`` and ``c2pa_builder_sign_data_hashed_embeddable``,
exported by the native library inside the c2pa-python wheel (``c2pa/libs/libc2pa_c.so``)
but not wrapped by its Python layer. This module calls exactly those two functions through
the handle c2pa-python has already loaded: the claim, the assertions, the COSE signature
and the JUMBF are all made by the CAI library, none here.

It reaches into c2pa-python's private ``_lib`` and handles, so the ``c2pa`` extra pins the
minor release this was checked against.
"""

from __future__ import annotations

import ctypes
import json
from typing import TYPE_CHECKING, TypedDict

from samark.errors import SamarkError

if TYPE_CHECKING:
    from c2pa import Builder, Signer

_BYTES_OUT = ctypes.POINTER(ctypes.POINTER(ctypes.c_ubyte))


class DataHash(TypedDict):
    """A ``c2pa.hash.data`` assertion as the CAI library reads it: the hash's name and
    algorithm, its bytes, the byte ranges it leaves out and its padding."""

    name: str
    alg: str
    hash: list[int]
    exclusions: list[dict[str, int]]
    pad: list[int]


class C2paUnavailableError(SamarkError):
    """c2pa-python or c2pa-text is missing, or lacks the calls this module needs."""


def _library() -> ctypes.CDLL:
    try:
        from c2pa import c2pa as c2pa_module
    except ImportError as error:  # pragma: no cover - exercised without the extra
        raise C2paUnavailableError(
            "C2PA manifests need the c2pa extra: pip install 'samark[c2pa]'"
        ) from error
    lib: ctypes.CDLL = c2pa_module._lib
    for name in (
        "c2pa_builder_data_hashed_placeholder",
        "c2pa_builder_sign_data_hashed_embeddable",
        "c2pa_manifest_bytes_free",
    ):
        if not hasattr(lib, name):
            raise C2paUnavailableError(f"this c2pa-python's native library has no {name}")
    placeholder = lib.c2pa_builder_data_hashed_placeholder
    placeholder.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p, _BYTES_OUT]
    placeholder.restype = ctypes.c_int64
    sign = lib.c2pa_builder_sign_data_hashed_embeddable
    sign.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_void_p,
        _BYTES_OUT,
    ]
    sign.restype = ctypes.c_int64
    lib.c2pa_manifest_bytes_free.argtypes = [ctypes.c_void_p]
    lib.c2pa_manifest_bytes_free.restype = None
    return lib


def _take(lib: ctypes.CDLL, size: int, out: ctypes._Pointer[ctypes.c_ubyte], what: str) -> bytes:
    if size < 0 or not out:
        from c2pa import c2pa as c2pa_module

        message = c2pa_module._read_native_error() or "no message"
        raise SamarkError(f"the C2PA library could not {what}: {message}")
    try:
        return ctypes.string_at(out, size)
    finally:
        lib.c2pa_manifest_bytes_free(ctypes.cast(out, ctypes.c_void_p))


def placeholder_size(builder: Builder, signer: Signer, format: str) -> int:
    """The size in bytes of the signed manifest store ``builder`` will make with ``signer``.

    The CAI library pads the signed store to exactly this size, so the wrapper that
    carries it can be measured (and excluded from the hash) before the hash is taken.
    """
    lib = _library()
    out = ctypes.POINTER(ctypes.c_ubyte)()
    size = lib.c2pa_builder_data_hashed_placeholder(
        ctypes.cast(builder._handle, ctypes.c_void_p),
        signer.reserve_size(),
        format.encode(),
        ctypes.byref(out),
    )
    return len(_take(lib, size, out, "reserve a manifest"))


def sign_data_hashed(builder: Builder, signer: Signer, data_hash: DataHash, format: str) -> bytes:
    """The signed manifest store (JUMBF) for ``builder``, hard-bound by ``data_hash``.

    ``data_hash`` is a ``c2pa.hash.data`` assertion as the CAI library reads it:
    ``{"name", "alg", "hash": [bytes], "exclusions": [{"start", "length"}], "pad": []}``.
    Call :func:`placeholder_size` on the same builder first.
    """
    lib = _library()
    out = ctypes.POINTER(ctypes.c_ubyte)()
    size = lib.c2pa_builder_sign_data_hashed_embeddable(
        ctypes.cast(builder._handle, ctypes.c_void_p),
        ctypes.cast(signer._handle, ctypes.c_void_p),
        json.dumps(data_hash).encode(),
        format.encode(),
        None,
        ctypes.byref(out),
    )
    return _take(lib, size, out, "sign the manifest")
