"""What later statements do with a value: read it only as data (``x.detach()``, ``x.data``,
``x.cpu().numpy()``, ``x.tolist()``, handed to a project function that only reads it, or used
to compute a local that is itself only read so), or something that may keep its graph."""

from __future__ import annotations

from torchlint.analysis.scopes import Context
from torchlint.analysis.syntax import dotted_name, iter_expression_nodes, last_part
from torchlint.analysis.vocabulary import DETACHING_METHODS, NON_DIFFERENTIABLE_METHODS
from torchlint.lazy import cst

# Tensor methods that keep requires_grad: `.numpy()` after them still raises on a graph output.
GRAPH_KEEPING_CONVERSIONS = frozenset({"cpu", "cuda", "to", "squeeze", "unsqueeze", "view", "reshape", "flatten", "permute",
                                       "transpose", "contiguous", "float", "double", "half", "clone", "exp", "sigmoid", "softmax"})
# ... and with the methods whose results carry no graph: what a detaching call may follow
CONVERSIONS_KEEPING_DATA = GRAPH_KEEPING_CONVERSIONS | NON_DIFFERENTIABLE_METHODS

TORCH_FUNCTION_PREFIXES = frozenset({"F", "torch", "nn.functional", "torch.nn.functional"})
# Functions of one tensor that keep its graph, read through to what they convert.
ELEMENTWISE_FUNCTIONS = frozenset({"softmax", "log_softmax", "sigmoid", "tanh", "relu", "exp"})


class UseQueries:
    def only_read_as_data(self, names: set, statements, helpers: bool = False, derive: int = 0) -> bool:
        """Is every later use of the names, until they are bound again, turned into data where
        it is read (``x.data``, ``x.detach()``, ``x.cpu().numpy()``, ``x.tolist()``; with
        ``helpers``, also handed to a project function that only reads it; with ``derive``,
        also used to compute a local that is itself only read as data, ``kl = (p * (p /
        q).log()).sum()`` then ``kl.item()``, to that depth), and is there one?"""
        used = False
        for index, (stmt, ctx) in enumerate(statements):
            converted = set()
            for expr in self.own_expressions(stmt):
                for node in iter_expression_nodes(expr):
                    receiver = None
                    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in DETACHING_METHODS:
                        receiver = node.func.value
                    elif type(node) is cst.Attribute and node.attr.value == "data":
                        receiver = node.value
                    if receiver is not None:
                        receiver = conversion_source(receiver, GRAPH_KEEPING_CONVERSIONS)
                        if type(receiver) is cst.Name:
                            converted.add(id(receiver))
                    elif helpers and type(node) is cst.Call:
                        converted.update(id(argument) for argument in self.read_as_data_by(node, ctx))
            bound = {id(node) for target in getattr(stmt, "targets", [stmt]) for node in iter_expression_nodes(target.target)
                     if type(node) is cst.Name} if type(stmt) in (cst.Assign, cst.AnnAssign) else set()
            derived = None
            if derive and type(stmt) is cst.Assign and bound and all(
                    type(target.target) is cst.Name for target in stmt.targets):
                derived = {target.target.value for target in stmt.targets}
            for expr in self.own_expressions(stmt):
                for node in iter_expression_nodes(expr):
                    if type(node) is cst.Name and node.value in names and id(node) not in bound:
                        if id(node) not in converted:
                            if derived is None or derived & names \
                                    or self.backpropagated_at(derived, stmt, ctx) \
                                    or not self.only_read_as_data(derived, statements[index + 1:], helpers, derive - 1):
                                return False
                        used = True
            if type(stmt) in (cst.Assign, cst.AugAssign, cst.AnnAssign) and names & {
                    node.value for target in getattr(stmt, "targets", [stmt]) for node in
                    iter_expression_nodes(target.target) if type(node) is cst.Name}:
                break  # bound again
        return used

    def backpropagated_at(self, names: set, stmt, ctx: Context) -> bool:
        """Does a ``backward()`` run on what ``stmt`` binds to one of the names (the training
        step's ``loss``, not an evaluation loop's ``loss`` of the same name)?"""
        return any(self.binding_backpropagated(binding) for name in names
                   for binding in ctx.scope.bindings.get(name, ()) if binding.stmt is stmt)

    def read_as_data_by(self, call, ctx: Context) -> list:
        """The name arguments of a call of a project function that only reads them: it keeps
        none of them, returns nothing attached and trains nothing (``self._sample_actions(logits)``
        returning a sampled action as a NumPy array)."""
        names = [arg.value for arg in call.args if type(arg.value) is cst.Name]
        if not names:
            return []
        callee = self.called_function(call, ctx)
        if callee is None or callee.kind != "function":
            return []
        owner = callee.owner
        if owner.returns_attached(callee) is not None or owner.passes_tensors_through(callee) \
                or owner.backpropagates(callee) or owner.steps_optimizer(callee) or owner.kept_parameters(callee):
            return []
        return names


def conversion_source(expr, methods, stop=None):
    """What ``expr`` is a conversion of, past subscripts and calls of ``methods``
    (``out[0].cpu()`` -> ``out``); the walk ends at ``stop``."""
    while expr is not stop:
        if type(expr) is cst.Subscript:
            expr = expr.value
        elif type(expr) is cst.Call and (dotted_name(expr.func) or "").rpartition(".")[0] in TORCH_FUNCTION_PREFIXES:
            if not (expr.args and expr.args[0].keyword is None
                    and last_part(dotted_name(expr.func)) in methods | ELEMENTWISE_FUNCTIONS):
                break
            expr = expr.args[0].value  # `F.softmax(logits, dim=1).data`
        elif type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in methods:
            expr = expr.func.value
        else:
            break
    return expr
