"""One-off studies behind dated results (benchmarks/README.md), as a package.

Run each from the repository root as ``python -m benchmarks.studies.NAME ...``; a study
imports another as ``benchmarks.studies.NAME`` and the shared helpers as
``benchmarks.NAME``, never through ``sys.path``.
"""
