# `python -m torchlint.verify` puts the working directory first on sys.path, like `python -m
# torchlint` (see torchlint/__main__.py): take it off before importing anything else, unless
# torchlint itself runs from there.
import os
import sys

if sys.path and not getattr(sys.flags, "safe_path", False):
    try:
        _here = os.getcwd()
    except OSError:
        _here = None
    _first = sys.path[0]
    _package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if (_first == "" or os.path.abspath(_first) == _here) and os.path.abspath(_first or ".") != _package_parent:
        del sys.path[0]

from torchlint.verify.cli import main  # noqa: E402

raise SystemExit(main(sys.argv[1:]))
