import sys

from torchlint.verify.cli import main

raise SystemExit(main(sys.argv[1:]))
