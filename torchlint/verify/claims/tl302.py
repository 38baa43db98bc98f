"""TL302 inplace-on-saved-tensor: the op succeeds, backward() then fails on the modified tensor."""

from torchlint.verify.claims import Claim, Program, raises_vs_clean

MODIFIED_INPLACE = "modified by an inplace operation"

CLAIMS = [
    Claim(
        code="TL302",
        claim=f"{title}: backward() raises because a saved tensor was modified; the fixed version trains",
        metric="exception at backward()",
        bad=Program(f"TL302/bad_{name}.py"),
        chart=('outcome',),
        good=Program(f"TL302/good_{name}.py"),
        check=raises_vs_clean("RuntimeError", MODIFIED_INPLACE),
        step_counts=(1, 2),
    )
    for name, title in (
        ("sigmoid_clamp", "`sigmoid` output clamped in place"),
        ("attention_weights", "`exp()` attention scores normalised in place"),
        ("residual_block", "a shortcut added into an activation's output in place"),
        ("no_grad_clamp", "a saved softmax output clamped in place under no_grad"),
    )
]
