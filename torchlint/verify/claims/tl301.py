"""TL301 inplace-on-grad-leaf: autograd refuses an in-place op on a leaf that requires grad."""

from torchlint.verify.claims import Claim, Program, all_of, good_parameters_change, raises_vs_clean

LEAF_INPLACE = "a leaf Variable that requires grad is being used in an in-place operation"

CLAIMS = [
    Claim(
        code="TL301",
        claim=f"{title}: the in-place op on a leaf raises at once; the fixed version trains",
        metric="exception, param_delta",
        bad=Program(f"TL301/bad_{name}.py"),
        chart=('outcome', 'param_delta'),
        good=Program(f"TL301/good_{name}.py"),
        check=all_of(raises_vs_clean("RuntimeError", LEAF_INPLACE), good_parameters_change()),
        step_counts=(1, 2),
    )
    for name, title in (
        ("manual_sgd", "manual SGD `w -= lr * w.grad`"),
        ("weight_clipping", "WGAN weight clipping `p.clamp_()`"),
        ("reinit_head", "re-initialising a head with `weight.normal_()`"),
        ("custom_module", "a module's parameters changed in place in forward()"),
    )
]
