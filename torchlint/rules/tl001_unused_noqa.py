from __future__ import annotations

from torchlint.rule import Rule


class UnusedNoqa(Rule):
    """
    ## What it does
    Finds `# noqa` comments that name a torchlint code (`# noqa: TL101`) which torchlint no
    longer reports on that line. Codes of other tools (`E501`, `F401`) are never reported, nor
    codes of torchlint rules switched off in the run (they may still be needed), nor a bare
    `# noqa`.

    ## Why is this bad?
    A stale suppression hides the next real finding on that line: after a refactoring the same
    line can keep a new tensor alive, and the old comment silences it. Removing the code keeps
    the suppressions honest. `torchlint --fix` removes the stale code from the comment (the
    whole comment when it named nothing else); other tools' codes stay as they are.

    Off by default (like ruff's `RUF100`): select it with `--extend-select TL001`. Every rule a
    comment names is run to decide, whether selected or not.
    """

    CODE = "TL001"
    NAME = "unused-noqa"
    MESSAGE = "`# noqa` names `{code}`, which torchlint does not report on this line"
    FIX = "remove the code from the comment"
    # The engine computes TL001 from the other rules' findings and never parses a file for it.
    AUTOFIX = (
        "Safe: removes the stale code from the `# noqa` comment (the whole comment when it named "
        "nothing else); other tools' codes stay."
    )
    TOKENS = ("noqa",)
    # Off by default, like ruff's RUF100: `--extend-select TL001` when cleaning up suppressions.
    ENABLED_BY_DEFAULT = False
    CLAIM = ""
    INVALID = [
        """\
import torch

total = 0.0
for x in loader:
    total += model(x).item()  # noqa: TL102  # expect: TL001
""",
        """\
losses = []
for x, y in loader:
    losses.append(criterion(model(x), y).detach())  # noqa: E501, TL101  # expect: TL001
""",
    ]
    VALID = [
        """\
losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    losses.append(loss)  # noqa: TL101 - the epoch summary backpropagates through them
""",
        """\
for x in loader:
    total = model(x).sum()  # noqa: E501
    log(total)  # noqa
""",
    ]
