"""The storage tracker and graph-node counter on allocations whose sizes are known exactly."""

import copy
import gc
import io
import threading

import pytest
from optional_deps import require

torch = require("torch", module_level=True)

from torchlint.verify.tracker import CudaMeter, StorageTracker, count_graph_nodes, iter_tensors  # noqa: E402


def tracked(function):
    """Snapshot after ``function()`` ran under a fresh tracker (its result kept alive)."""
    with StorageTracker() as tracker:
        result = function()
        snapshot = tracker.snapshot()
    return snapshot, result


@pytest.fixture(autouse=True, scope="module")
def frozen_heap():
    """Take torch's ~165k objects out of the collector for these tests (as the probe does), so
    the gc.collect() of every snapshot costs microseconds instead of ~70 ms."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def one_thread():
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def test_fresh_tensor_counts_its_real_bytes():
    snapshot, _ = tracked(lambda: torch.zeros(10, 3))
    assert snapshot == {"live_bytes": 120, "peak_bytes": 120, "allocations": 1, "allocated_bytes": 120}


def test_view_allocates_nothing():
    base = torch.arange(12.0)
    snapshot, views = tracked(lambda: [base.view(3, 4), base[2:], base.t() if base.dim() == 2 else base.unsqueeze(0)])
    assert snapshot["allocations"] == 0 and snapshot["live_bytes"] == 0
    assert all(view.untyped_storage().data_ptr() == base.untyped_storage().data_ptr() for view in views)


def test_inplace_op_allocates_nothing():
    base = torch.ones(64)
    snapshot, _ = tracked(lambda: base.mul_(2).add_(1).clamp_(max=2.5))
    assert snapshot["allocations"] == 0 and snapshot["peak_bytes"] == 0


def test_out_argument_reuses_the_given_storage():
    a, b, out = torch.ones(16), torch.ones(16), torch.empty(16)
    snapshot, _ = tracked(lambda: torch.add(a, b, out=out))
    assert snapshot["allocations"] == 0


def test_out_argument_that_must_grow_counts_the_growth():
    a = torch.ones(16)
    snapshot, result = tracked(lambda: torch.add(a, a, out=torch.empty(0)))
    assert result.untyped_storage().nbytes() == 64
    assert snapshot["live_bytes"] == 64 and snapshot["allocations"] == 1


@pytest.mark.parametrize("values, dtype, nbytes", [
    ([1.0, 2.0, 3.0], torch.float32, 12),
    ([1, 2, 3, 4], torch.int64, 32),
    ([[True, False]], torch.bool, 2),
])
def test_tensor_from_list_arrives_through_lift_fresh_and_counts(values, dtype, nbytes):
    snapshot, result = tracked(lambda: torch.tensor(values))
    assert result.dtype == dtype
    assert snapshot == {"live_bytes": nbytes, "peak_bytes": nbytes, "allocations": 1, "allocated_bytes": nbytes}


def test_freeing_the_last_view_frees_the_storage():
    with StorageTracker() as tracker:
        base = torch.zeros(256)
        view = base[128:]
        del base
        assert tracker.snapshot()["live_bytes"] == 1024  # the view keeps the whole storage
        del view
        assert tracker.snapshot()["live_bytes"] == 0
        assert tracker.peak_bytes == 1024


def test_temporaries_show_in_peak_and_count_not_in_live():
    def loop():
        kept = []
        for _ in range(3):
            scratch = torch.ones(100)  # 400 B, dropped at the next iteration
            kept.append(scratch.sum())  # 4 B kept
        return kept

    snapshot, _ = tracked(loop)
    # ones + sum per step. The previous scratch dies only when `scratch` is rebound, after the new
    # one exists: the peak is at step 3 before its sum, two scratches and two kept sums.
    assert snapshot == {"live_bytes": 12, "peak_bytes": 2 * 400 + 2 * 4, "allocations": 6, "allocated_bytes": 1212}


def test_storage_freed_in_a_reference_cycle_is_collected_before_reading():
    class Holder:
        pass

    with StorageTracker() as tracker:
        holder = Holder()
        holder.self = holder
        holder.tensor = torch.zeros(100)
        del holder
        assert tracker.snapshot(collect=True)["live_bytes"] == 0


def test_preexisting_tensors_are_not_counted():
    weight = torch.randn(32, 32)
    with StorageTracker(mark_existing=False) as tracker:
        tracker.mark_preexisting({"weight": weight})
        alias = torch.empty(0).set_(weight.untyped_storage())  # set_ onto a known storage
        assert alias.data_ptr() == weight.data_ptr()
        assert tracker.snapshot()["allocations"] == 0
    with StorageTracker() as tracker:  # mark_existing=True finds it through the garbage collector
        torch.empty(0).set_(weight.untyped_storage())
        assert tracker.snapshot()["allocations"] == 0


def test_deepcopy_and_torch_load_storages_arrive_through_set_():
    source = torch.arange(64, dtype=torch.float32)
    snapshot, copied = tracked(lambda: copy.deepcopy(source))
    assert copied.data_ptr() != source.data_ptr()
    assert snapshot["live_bytes"] == 256

    buffer = io.BytesIO()
    torch.save(source, buffer)
    buffer.seek(0)
    snapshot, loaded = tracked(lambda: torch.load(buffer))
    assert torch.equal(loaded, source)
    assert snapshot["live_bytes"] == 256


def test_untyped_storage_resize_is_accounted():
    def grow():
        tensor = torch.zeros(4)  # 16 B
        tensor.untyped_storage().resize_(4096)
        return tensor

    snapshot, tensor = tracked(grow)
    assert tensor.untyped_storage().nbytes() == 4096
    assert snapshot["live_bytes"] == 4096 and snapshot["peak_bytes"] == 4096
    del tensor


def test_tensor_resize_is_accounted():
    snapshot, _ = tracked(lambda: torch.zeros(4).resize_(100))
    assert snapshot["live_bytes"] == 400


def test_frees_on_another_thread_are_counted():
    with StorageTracker() as tracker:
        tensors = [torch.zeros(1000) for _ in range(4)]
        assert tracker.snapshot()["live_bytes"] == 16000
        worker = threading.Thread(target=tensors.clear)
        worker.start()
        worker.join()
        assert tracker.snapshot()["live_bytes"] == 0


def small_training_run():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters())
    data = torch.randn(16, 32)
    losses = []
    for _ in range(3):
        optimizer.zero_grad()
        loss = model(data).pow(2).mean()
        loss.backward()
        optimizer.step()
        losses.append(loss)
    return losses


def test_counts_are_identical_from_run_to_run():
    small_training_run()  # lazy initialisation outside the comparison
    gc.collect()
    first, _ = tracked(small_training_run)
    second, _ = tracked(small_training_run)
    assert first == second
    assert first["allocations"] > 20 and first["live_bytes"] > 0


def test_graph_nodes_of_a_known_graph():
    leaf = torch.ones(3, requires_grad=True)
    out = (leaf * 2).exp().sum()  # SumBackward, ExpBackward, MulBackward, AccumulateGrad
    assert count_graph_nodes(out) == 4
    # The same graph reached twice, through containers and an object's attributes, counts once.
    holder = type("Holder", (), {})()
    holder.kept = {"loss": [out, (out,)]}
    assert count_graph_nodes([holder, out]) == 4
    assert count_graph_nodes(out.detach()) == 0
    assert count_graph_nodes([leaf, 3, "text", None]) == 0


def test_graph_nodes_of_separate_steps_add_up():
    weight = torch.ones(4, requires_grad=True)
    losses = [(weight * step).sum() for step in range(1, 4)]  # 2 nodes each, shared AccumulateGrad
    assert count_graph_nodes(losses) == 3 * 2 + 1
    total = losses[0] + losses[1] + losses[2]
    assert count_graph_nodes(total) == 3 * 2 + 1 + 2  # plus the two AddBackward nodes


def test_iter_tensors_finds_module_parameters_once():
    model = torch.nn.Linear(3, 2)
    found = list(iter_tensors({"a": model, "b": [model, model.weight]}))
    assert sorted(tuple(t.shape) for t in found) == [(2,), (2, 3)]


def test_cuda_meter_is_harmless_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("checks the CPU-only guard")
    meter = CudaMeter()
    meter.start()
    assert meter.read() == {}
