"""The checks a user runs on their own machine (benchmarks/README.md), as a package.

Run each from the repository root as a module, ``python -m benchmarks.NAME ...``; one
imports another as ``benchmarks.NAME`` (``human_texts``, ``keyring``), never through
``sys.path``. The one-off studies are ``benchmarks.studies``.
"""
