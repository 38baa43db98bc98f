# `python -m torchlint` put the working directory first on sys.path: an `argparse.py` or `re.py`
# there would be imported instead of the standard library's. Take it off before importing
# anything (sys and os are always loaded already), unless torchlint itself runs from there.
import os
import sys

if sys.path and not getattr(sys.flags, "safe_path", False):
    try:
        _here = os.getcwd()
    except OSError:
        _here = None
    _first = sys.path[0]
    _package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if (_first == "" or os.path.abspath(_first) == _here) and os.path.abspath(_first or ".") != _package_parent:
        del sys.path[0]

from torchlint.cli import run  # noqa: E402

run()
