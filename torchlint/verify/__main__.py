import sys

from torchlint._safe_path import drop_working_directory

drop_working_directory()

from torchlint.verify.cli import main  # noqa: E402

raise SystemExit(main(sys.argv[1:]))
