"""`python -m torchlint` (and `-m torchlint.verify`) put the working directory first on
sys.path: an `argparse.py` or `re.py` there would be imported instead of the standard library's.
The entry points call ``drop_working_directory()`` before importing anything else (sys and os
are always loaded already; this module is found through the package, not sys.path)."""

import os
import sys


def drop_working_directory() -> None:
    """Take the working directory off the front of sys.path, unless torchlint itself runs from
    there (a source checkout) or Python already left it off (``-P``)."""
    if not sys.path or getattr(sys.flags, "safe_path", False):
        return
    try:
        here = os.getcwd()
    except OSError:
        here = None
    first = sys.path[0]
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if (first == "" or os.path.abspath(first) == here) and os.path.abspath(first or ".") != package_parent:
        del sys.path[0]
