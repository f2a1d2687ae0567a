"""The ``samark`` command line: keys, generation, detection, keyrings, a demo, serving,
the detection page, the provenance record, attacks, experiments and model installs. One
module per command group; each adds its commands to :data:`samark.cli.app.app` when
imported.

Exit codes of ``samark detect``, as with grep: 0 a watermark was found (in at least one
record), 1 none was found, 2 an error.
"""

import importlib

from samark.cli.app import app

#: the command modules, in the order ``samark --help`` lists their commands
COMMAND_MODULES = (
    "marking",
    "detecting",
    "key_checking",
    "centring",
    "demo",
    "serve",
    "page",
    "record",
    "attack",
    "catalog",
    "evaluate",
)
for _module in COMMAND_MODULES:
    importlib.import_module(f"samark.cli.{_module}")

__all__ = ["app"]
