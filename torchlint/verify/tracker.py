"""Exact tensor-storage accounting, autograd graph counting and CUDA allocator readings.

``StorageTracker`` is a ``TorchDispatchMode``: it sees every aten op run on this thread while it
is active and records each *fresh* output storage once, keyed by its ``UntypedStorage`` object.
A ``weakref.finalize`` on that object subtracts the storage's bytes when it dies, so live bytes are
exact (real ``nbytes()``, not numel × itemsize) and peak / allocation counts follow.

Fresh or not comes from the op schema: a return without alias annotation is a new tensor; ``Tensor(a)``
is a view, ``Tensor(a!)`` an in-place or ``out=`` result. Gaps the schema alone leaves, and how they
are closed:

- ``torch.tensor(list)`` builds its tensor outside the dispatcher and hands it to ``lift_fresh``
  (schema: alias of its input). An unknown storage arriving through ``lift_fresh`` is fresh.
- ``deepcopy`` / ``torch.load`` / unpickling build an ``UntypedStorage`` outside the dispatcher and
  attach it with ``set_``. The ``set_`` source storage is fresh unless it was seen before (as any op's
  input, or marked pre-existing).
- ``UntypedStorage.resize_`` does not dispatch. While a tracker is active the Python method is
  wrapped so the size change is accounted at once; a resize from C++ that skips both paths is picked
  up by ``reconcile()`` (run on every ``snapshot()``), so live bytes are exact at each reading and only
  a transient peak could be missed. In-place / ``out=`` results are re-measured after each op, since
  ``resize_`` and ``out=`` ops grow storages in place.
- Storages that existed before tracking started are never counted. On entry every tensor the garbage
  collector knows of is registered as pre-existing, and ``mark_preexisting`` registers parameters and
  inputs explicitly, so that a later ``set_`` onto their storage is not mistaken for an allocation.
- Reference cycles delay frees: ``snapshot()`` runs ``gc.collect()`` first.
- Ops on other threads are not seen (dispatch modes are thread-local); finalizers may run on any
  thread, hence the lock.
"""

from __future__ import annotations

import gc
import threading
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

aten = torch.ops.aten
_LIFT_OPS = {aten.lift_fresh.default, aten.lift_fresh_copy.default}


def _storage_of(tensor: torch.Tensor):
    """The tensor's UntypedStorage, or None for tensors without one (sparse, meta, subclasses)."""
    if tensor.device.type == "meta" or tensor.layout != torch.strided:
        return None
    try:
        return tensor.untyped_storage()
    except (RuntimeError, NotImplementedError, TypeError):
        return None


@dataclass
class _Record:
    bytes: int  # bytes currently counted for this storage
    base: int  # bytes the storage already had when it was adopted (pre-existing, then grown)


class StorageTracker(TorchDispatchMode):
    """Counts storages created while active. Use as ``with StorageTracker() as tracker: ...``."""

    def __init__(self, mark_existing: bool = True) -> None:
        super().__init__()
        self._mark_existing = mark_existing
        self._lock = threading.RLock()  # re-entrant: a finalizer can fire while we hold it
        self._tracked: dict[int, tuple[weakref.ref, _Record]] = {}
        self._external: dict[int, tuple[weakref.ref, int]] = {}  # id -> (ref, nbytes when seen)
        self.live_bytes = 0
        self.peak_bytes = 0
        self.allocations = 0
        self.allocated_bytes = 0
        self.sizes: Counter[int] = Counter()  # allocation size in bytes -> count
        self._patched_resize = None

    # ----------------------------------------------------------------- dispatch
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _LIFT_OPS:
            for tensor in _tensors((args, kwargs)):
                self._adopt_if_unknown(_storage_of(tensor))
        elif func.overloadpacket is aten.set_:
            for value in tree_leaves((args, kwargs)):
                if isinstance(value, (torch.UntypedStorage, torch.TypedStorage)):
                    self._adopt_if_unknown(value.untyped_storage() if isinstance(value, torch.TypedStorage) else value)
        for tensor in _tensors((args, kwargs)):
            self._note_external(_storage_of(tensor))

        out = func(*args, **kwargs)

        returns = func._schema.returns
        outputs = out if isinstance(out, (tuple, list)) and len(returns) > 1 else (out,)
        for ret, value in zip(returns, outputs):
            alias = ret.alias_info
            for tensor in _tensors(value):
                storage = _storage_of(tensor)
                if storage is None:
                    continue
                if alias is None:
                    self._track(storage)
                elif alias.is_write:
                    self._resized(storage)  # resize_, set_, out= may grow the storage in place
        return out

    # ----------------------------------------------------------------- bookkeeping
    def _known(self, key: int) -> bool:
        return key in self._tracked or key in self._external

    def _note_external(self, storage) -> None:
        if storage is None:
            return
        key = id(storage)
        with self._lock:
            if self._known(key):
                return
            ref = weakref.ref(storage, lambda _ref, key=key: self._forget_external(key))
            self._external[key] = (ref, storage.nbytes())

    def _forget_external(self, key: int) -> None:
        with self._lock:
            self._external.pop(key, None)

    def _adopt_if_unknown(self, storage) -> None:
        if storage is not None and not self._known(id(storage)):
            self._track(storage)

    def _track(self, storage, base: int = 0) -> None:
        key = id(storage)
        size = storage.nbytes() - base
        with self._lock:
            if key in self._tracked:
                return
            # Already-seen external storage returned by an op without alias annotation: not new.
            if key in self._external and base == 0:
                return
            self._external.pop(key, None)
            record = _Record(size, base)
            self._tracked[key] = (weakref.ref(storage), record)
            self._count_allocation(size)
        finalizer = weakref.finalize(storage, self._freed, key)
        finalizer.atexit = False

    def _count_allocation(self, size: int) -> None:
        if size <= 0:
            return  # a zero-byte storage holds no memory
        self.allocations += 1
        self.allocated_bytes += size
        self.sizes[size] += 1
        self.live_bytes += size
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _freed(self, key: int) -> None:
        with self._lock:
            entry = self._tracked.pop(key, None)
            if entry is not None:
                self.live_bytes -= entry[1].bytes

    def _resized(self, storage) -> None:
        """Account a storage whose size may have changed in place."""
        key = id(storage)
        now = storage.nbytes()
        with self._lock:
            if key in self._tracked:
                record = self._tracked[key][1]
                self._apply_size(record, now - record.base)
                return
            entry = self._external.get(key)
        if entry is not None and now > entry[1]:
            # A pre-existing storage grew while tracked: count the growth only.
            self._track(storage, base=entry[1])

    def _apply_size(self, record: _Record, size: int) -> None:
        delta = size - record.bytes
        if delta == 0:
            return
        if record.bytes == 0:
            record.bytes = size
            self._count_allocation(size)
            return
        record.bytes = size
        self.live_bytes += delta
        if delta > 0:
            self.allocated_bytes += delta
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def reconcile(self) -> None:
        """Re-read every live tracked storage's size (catches resizes that skipped both hooks)."""
        with self._lock:
            entries = list(self._tracked.values())
        for ref, record in entries:
            storage = ref()
            if storage is not None:
                with self._lock:
                    self._apply_size(record, storage.nbytes() - record.base)

    # ----------------------------------------------------------------- public API
    def mark_preexisting(self, *objects: Any) -> None:
        """Register the storages of tensors reachable from ``objects`` as not ours."""
        for tensor in iter_tensors(objects):
            self._note_external(_storage_of(tensor))

    def snapshot(self, collect: bool = True) -> dict[str, int]:
        if collect:
            gc.collect()
        self.reconcile()
        with self._lock:
            return {
                "live_bytes": self.live_bytes,
                "peak_bytes": self.peak_bytes,
                "allocations": self.allocations,
                "allocated_bytes": self.allocated_bytes,
            }

    def mark_all_existing(self) -> None:
        """Register every tensor the garbage collector knows of as pre-existing."""
        for value in gc.get_objects():
            if issubclass(type(value), torch.Tensor):  # type(): isinstance may trip lazy proxies
                self._note_external(_storage_of(value))

    def __enter__(self):
        if self._mark_existing:
            self.mark_all_existing()
        self._patch_storage_resize()
        return super().__enter__()

    def __exit__(self, *exc_info):
        try:
            return super().__exit__(*exc_info)
        finally:
            self._unpatch_storage_resize()

    def _patch_storage_resize(self) -> None:
        original = torch.UntypedStorage.__dict__.get("resize_")
        tracker = self

        def resize_(storage, size):
            result = (original or torch._C.StorageBase.resize_)(storage, size)
            tracker._resized(storage)
            return result

        self._patched_resize = (original,)
        torch.UntypedStorage.resize_ = resize_

    def _unpatch_storage_resize(self) -> None:
        if self._patched_resize is None:
            return
        (original,) = self._patched_resize
        if original is None:
            del torch.UntypedStorage.resize_
        else:
            torch.UntypedStorage.resize_ = original
        self._patched_resize = None


def _tensors(tree: Any) -> Iterator[torch.Tensor]:
    return (leaf for leaf in tree_leaves(tree) if isinstance(leaf, torch.Tensor))


# --------------------------------------------------------------------- object graph walks
_ATOMS = (str, bytes, int, float, complex, bool, type(None), type, range)


def iter_tensors(root: Any, limit: int = 1_000_000) -> Iterator[torch.Tensor]:
    """Every distinct tensor reachable from ``root`` through containers and objects' ``__dict__``."""
    seen: set[int] = set()
    keep: list[Any] = []  # holds visited objects so their ids are not reused during the walk
    stack = [root]
    while stack and len(seen) < limit:
        value = stack.pop()
        if isinstance(value, _ATOMS) or id(value) in seen:
            continue
        seen.add(id(value))
        keep.append(value)
        if isinstance(value, torch.Tensor):
            yield value
            continue
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend(value)
        elif callable(value) and not hasattr(value, "__dict__"):
            continue  # builtins, C functions
        else:
            attributes = getattr(value, "__dict__", None)
            if isinstance(attributes, dict) and not isinstance(value, type(gc)):  # skip modules
                stack.extend(attributes.values())


def count_graph_nodes(root: Any) -> int:
    """Distinct autograd nodes reachable from the tensors in ``root`` (via ``next_functions``)."""
    nodes: dict[int, Any] = {}  # id -> node; holding the node keeps its id unique
    stack = [t.grad_fn for t in iter_tensors(root) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in nodes:
            continue
        nodes[id(node)] = node
        stack.extend(child for child, _ in getattr(node, "next_functions", ()))
    return len(nodes)


# --------------------------------------------------------------------- CUDA
def cuda_available() -> bool:
    return torch.cuda.is_available()


class CudaMeter:
    """The CUDA caching allocator's own counters around a region (every call guarded)."""

    def __init__(self) -> None:
        self.base_allocated = 0
        self.base_allocations = 0
        self.base_segments = 0

    def start(self) -> None:
        if not cuda_available():
            return
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        stats = torch.cuda.memory_stats()
        self.base_allocated = torch.cuda.memory_allocated()
        self.base_allocations = stats.get("allocation.all.allocated", 0)
        self.base_segments = stats.get("segment.all.allocated", 0)

    def read(self) -> dict[str, int]:
        if not cuda_available():
            return {}
        torch.cuda.synchronize()
        stats = torch.cuda.memory_stats()
        return {
            "live_bytes": torch.cuda.memory_allocated() - self.base_allocated,
            "peak_bytes": torch.cuda.max_memory_allocated() - self.base_allocated,
            "allocations": stats.get("allocation.all.allocated", 0) - self.base_allocations,
            "segments_allocated": stats.get("segment.all.allocated", 0) - self.base_segments,
            "reserved_bytes": torch.cuda.memory_reserved(),
        }


def synchronize(device: str) -> None:
    if device.startswith("cuda") and cuda_available():
        torch.cuda.synchronize()
