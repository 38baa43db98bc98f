from torchlint._safe_path import drop_working_directory

drop_working_directory()

from torchlint.cli import run  # noqa: E402

run()
