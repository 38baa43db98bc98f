"""TL103 recurrent-state-not-detached: the second backward() fails; papering over it with
retain_graph=True makes memory grow linearly and the work per step grow with every step."""

from torchlint.verify.claims import (
    Claim, Program, all_of, allocations_grow_quadratically, grows_linearly_vs_flat, raises_vs_clean,
)

SECOND_BACKWARD = "Trying to backward through the graph a second time"

CLAIMS = [
    Claim(
        code="TL103",
        claim="feeding undetached state back makes the second backward() raise; detaching runs",
        metric="exception (steps 1, 2, 4), live bytes",
        bad=Program("TL103/bad_word_language_model.py"),
        chart=('outcome',),
        good=Program("TL103/good_word_language_model.py"),
        check=raises_vs_clean("RuntimeError", SECOND_BACKWARD, clean_below=2),
        step_counts=(1, 2, 4),
    ),
    Claim(
        code="TL103",
        claim="a module keeping its state in self.hidden fails the same way on the second step",
        metric="exception (steps 1, 2, 4), live bytes",
        bad=Program("TL103/bad_stateful_module.py"),
        chart=('outcome',),
        good=Program("TL103/good_stateful_module.py"),
        check=raises_vs_clean("RuntimeError", SECOND_BACKWARD, clean_below=2),
        step_counts=(1, 2, 4),
    ),
    Claim(
        code="TL103",
        claim="with retain_graph=True memory and graph grow linearly and allocations per step keep rising",
        metric="live bytes, graph nodes, allocations per step",
        bad=Program("TL103/bad_grucell_retain_graph.py"),
        chart=('live_bytes', 'graph_nodes', 'allocations_per_step'),
        good=Program("TL103/good_grucell_detach.py"),
        # measured: +233,472 B and +16 graph nodes per step (batch 64, hidden 128), allocations
        # per step 80 -> 144 from 2-4 to 4-8 steps; the detached loop is flat.
        check=all_of(
            grows_linearly_vs_flat("live_bytes", min_per_step=64 * 1024),
            grows_linearly_vs_flat("graph_nodes", min_per_step=8),
            allocations_grow_quadratically(1.3),
        ),
        step_counts=(2, 4, 8),  # curvature needs two intervals, whatever --steps is
    ),
]
