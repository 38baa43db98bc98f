"""TL402 gc-collect-in-loop: a full collection per step costs as much as walking every object."""

from torchlint.verify.claims import Claim, Measured, Outcome, Program

COLLECTION_SHARE = 0.5  # bad's extra time per step, as a share of one measured full collection


def _collection_per_step_costs(bad: Measured, good: Measured) -> Outcome:
    bad.expect_clean()
    good.expect_clean()
    bad_time, good_time = bad.time_per_step(), good.time_per_step()
    collection = bad.result.get("gc_collect_cpu_s") or 0.0
    extra = bad_time - good_time
    holds = collection > 0 and extra >= COLLECTION_SHARE * collection
    return Outcome(
        holds, f"{bad_time * 1e3:.1f} ms/step", f"{good_time * 1e3:.1f} ms/step",
        f"bad takes {extra * 1e3:.1f} ms CPU more per step; one full collection with the fixture's "
        f"objects alive costs {collection * 1e3:.1f} ms (need extra >= {COLLECTION_SHARE:g}x that)",
    )


CLAIMS = [
    Claim(
        code="TL402",
        claim="gc.collect() every step adds the cost of a full collection to every step",
        metric="CPU time per step (fastest step)",
        bad=Program("TL402/bad_training_loop.py"),
        chart=('time_per_step',),
        good=Program("TL402/good_training_loop.py"),
        check=_collection_per_step_costs,
        timing=2,
        timing_steps=(4,),
        step_counts=(2, 4),
    ),
]
