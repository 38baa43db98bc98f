"""TL101 tensor-stored-across-iterations: each stored graph-attached value keeps its graph."""

from torchlint.verify.claims import Claim, Program, all_of, good_retains_no_graph, grows_faster, grows_linearly_vs_flat

CLAIMS = [
    Claim(
        code="TL101",
        claim="without backward each stored output keeps its graph's activations: memory grows linearly",
        metric="live bytes per step, graph nodes",
        bad=Program("TL101/bad_collect_outputs.py"),
        chart=('live_bytes', 'graph_nodes'),
        good=Program("TL101/good_verify_collect_outputs.py"),
        # measured (3x Linear(256, 256), batch 64): bad +262,144 B and +8 nodes per step, good
        # +65,536 B per step (the detached outputs themselves) and no graph.
        check=all_of(
            grows_faster("live_bytes", min_per_step=128 * 1024, min_ratio=3),
            grows_linearly_vs_flat("graph_nodes", min_per_step=4),
            good_retains_no_graph,
        ),
    ),
    Claim(
        code="TL101",
        claim="after backward each stored loss still keeps its graph nodes: their number grows every step",
        metric="graph nodes per step",
        bad=Program("TL101/bad_training_loop.py"),
        chart=('graph_nodes',),
        good=Program("TL101/good_training_loop.py"),
        # measured: bad +10 nodes per step (the tensor bytes grow only by the 4 B loss, as in good)
        check=all_of(grows_linearly_vs_flat("graph_nodes", min_per_step=5), good_retains_no_graph),
    ),
    Claim(
        code="TL101",
        claim=("a function that returns a number made from its list of losses "
               "(`sum(l.item() for l in losses)`) still held every batch's graph until its loop ended: "
               "the peak grows with the batches"),
        metric="peak bytes per step",
        bad=Program("TL101/bad_number_from_list.py"),
        chart=("peak_bytes",),
        good=Program("TL101/good_number_from_list.py"),
        # measured (3x Linear(256, 256), batch 64): bad +393,216 B of peak per batch, good (numbers
        # stored) +0 B; the autofix (`.detach()`) +65,536 B: on CPU a mean `mse_loss` is a 0-dim view
        # of its elementwise buffer, which the detached loss keeps (torch 2.13)
        check=grows_faster("peak_bytes", min_per_step=128 * 1024, min_ratio=4),
    ),
]
