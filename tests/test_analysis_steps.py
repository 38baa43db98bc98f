"""`analysis.flow.header_names_steps`: does a loop's header say it goes over steps, also through
the name its iterable was bound to?"""

from __future__ import annotations

import libcst as cst
import pytest

from torchlint.analysis import Analysis


def _loop_header_names_steps(source: str) -> bool:
    analysis = Analysis(cst.parse_module(source), "steps.py", source)
    loop = next(loop for loop in analysis.loops.values() if loop.implicit is None and "progress" in analysis.code(loop.node.iter))
    return analysis.header_names_steps(loop)


@pytest.mark.parametrize(("binding", "expected"), [
    ("progress = tqdm(enumerate(train_loader))", True),
    ("progress = enumerate(train_loader) if quiet else tqdm(enumerate(train_loader))", True),
    ("progress = tqdm(enumerate(files))", False),  # files, not batches
    ("progress = enumerate(checkpoints)", False),
])
def test_a_loop_over_a_name_bound_to_a_loader(binding, expected):
    source = f"def fit(train_loader, files, checkpoints, quiet):\n    {binding}\n    for i, item in progress:\n        use(item)\n"
    assert _loop_header_names_steps(source) is expected
