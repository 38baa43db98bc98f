"""`torchlint server`: torchlint as a language server (LSP over stdio) for any editor.

Diagnostics on open, change and save with the rule code, a link to the rule page and the help;
code actions (ignore on this line with ``# noqa``, apply a rule's fix, fix all); hover shows the
rule's documentation. Each document is linted in memory by the engine the CLI uses, with the
configuration the CLI would use for its path (the nearest ``pyproject.toml``, or ``--config``).

pygls (the ``lsp`` extra) is imported only here, never on the lint path. ``linting`` holds what
the server knows without the protocol; ``protocol`` is the pygls glue.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

USAGE_EXIT = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchlint server",
        description="Run torchlint as a language server, speaking LSP over stdin/stdout. "
                    "Editors start it; see the README's Editors section.",
    )
    parser.add_argument("--config", metavar="FILE",
                        help="read settings from FILE for every document, instead of the nearest pyproject.toml")
    parser.add_argument("--stdio", action="store_true",
                        help="accepted for editors that pass it; stdio is the only transport")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        from torchlint.lsp.protocol import create_server
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in ("pygls", "lsprotocol", "cattrs"):
            print("torchlint: error: torchlint server needs pygls (the `lsp` extra): pip install 'pygls>=2.0,<3'",
                  file=sys.stderr)
            return USAGE_EXIT
        raise
    create_server(args.config).start_io()
    return 0
