"""TL102 tensor-accumulated-across-iterations: the running sum chains every step's graph."""

from torchlint.verify.claims import Claim, Program, all_of, good_retains_no_graph, grows_linearly_vs_flat, stays_flat

CLAIMS = [
    Claim(
        code="TL102",
        claim="without backward the running sum keeps every step's activations: memory grows linearly",
        metric="live bytes per step",
        bad=Program("TL102/bad_verify_eval_sum.py"),
        chart=('live_bytes',),
        good=Program("TL102/good_verify_eval_sum.py"),
        # measured: bad +199,684 B per step (196,608 B of activations plus the batch's logits,
        # labels and loss), good flat with no graph.
        check=all_of(grows_linearly_vs_flat("live_bytes", min_per_step=128 * 1024), good_retains_no_graph),
    ),
    Claim(
        code="TL102",
        claim="after backward tensor bytes stay flat but every step's graph nodes stay chained to the sum",
        metric="graph nodes per step, live bytes",
        bad=Program("TL102/bad_running_loss.py"),
        chart=('graph_nodes', 'live_bytes'),
        good=Program("TL102/good_running_loss.py"),
        # measured: bad +11 nodes per step, bytes flat in both; good keeps no graph
        check=all_of(grows_linearly_vs_flat("graph_nodes", min_per_step=5), stays_flat("live_bytes"),
                     good_retains_no_graph),
    ),
]
