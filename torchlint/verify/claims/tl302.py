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
        ("saved_input", "an input that `x * gate` saved clipped in place"),
        ("prenorm_residual", "a residual added in place into the input `LayerNorm` saved"),
        ("normalised_features", "features divided in place by the norm that saved them"),
    )
]

MULTIPLE_VIEWS = "returns multiple views"

CLAIMS.append(Claim(
    code="TL302",
    claim="one of the views `chunk()` returned, scaled in place: the in-place op itself raises; the fixed version trains",
    metric="exception at the in-place op",
    bad=Program("TL302/bad_chunked_views.py"),
    chart=("outcome",),
    good=Program("TL302/good_chunked_views.py"),
    check=raises_vs_clean("RuntimeError", MULTIPLE_VIEWS),
    step_counts=(1, 2),
))
