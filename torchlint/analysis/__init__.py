"""The shared analysis of one module, built in a single walk over its statements.

Rules ask, the analysis answers. The walk (``walk``) records every statement with its context
(scope, the loops around it, grad mode, whether it runs conditionally inside its loop) and every
name binding. Everything costlier is computed lazily, only when a rule asks, and memoised, by one
module per family of questions:

- ``grad``: does autograd record here?
- ``flow``: loops, steps, straight-line sequences;
- ``attachment``: which values are still attached to the autograd graph;
- ``objects``: what a value is by evidence (module, optimizer, scaler);
- ``inplace``: in-place mutation and leaves that require grad;
- ``summaries``: what a call of a function defined in the project does, and which functions run
  once per step;
- ``arguments``: what a call's literal arguments decide inside the function it runs.
"""

from __future__ import annotations

from torchlint.analysis.vocabulary import (  # noqa: F401
    GradMode,
    model_roles,
    ATTACHMENT_TOKENS,
    CONVENTIONAL_MODULE_RE,
    MODULE_CLASS_RE,
    LIGHTNING_NO_GRAD_HOOKS,
    DETACHING_METHODS,
    NON_DIFFERENTIABLE_METHODS,
    NON_GRAPH_ATTRIBUTES,
    TORCH_NON_DIFFERENTIABLE,
    TORCH_VALUES_INDICES,
    PASS_THROUGH_BUILTINS,
    LOSS_FUNCTIONAL_RE,
    MODULE_PASS_THROUGH_METHODS,
    BACKWARD_FUNCTIONS,
    STEP_TARGET_RE,
    STEP_SOURCE_RE,
    CONTAINER_WRITES,
    STORING_METHODS,
    NON_MUTATING_INPLACE_METHODS,
    VIEW_METHODS,
    PARAMETER_CLASSES,
    PARAMETERISED_LAYERS,
    OPTIMIZER_WORDS,
    OPTIMIZER_PLURAL_WORDS,
    NOT_OPTIMIZER_WORDS,
    OPTIMIZER_CLASSES,
    OPTIMIZER_CLASS_RE,
    CLEARING_CALL_RE,
    GRAD_OVERWRITING_METHODS,
    _WORD_RE,
    name_words,
    looks_like_optimizer,
    _CONVENTIONAL_ROOTS,
    is_conventional_module_name,
    _BATCH_RE,
)
from torchlint.analysis.syntax import (  # noqa: F401
    _NEUTRAL_FIELDS,
    child_nodes,
    _is_node_type,
    iter_expression_nodes,
    dotted_name,
    storage_key,
    key_within,
    last_part,
    call_arguments,
    keyword_argument,
    training_test,
    eval_side,
    is_inplace_method,
    storage_base,
    is_view_subscript,
    strip_views,
    strip_pass_through,
    _requires_grad_flag,
    _parameters_owner,
    _literal_grad_mode,
    _merge,
    _tensor_operand_keys,
    _call_chain,
    _del_targets,
    _is_batch_stride,
    _names_match,
    call_name,
    mentioned_keys,
    empty_container,
    key_node,
    _is_grad_attribute,
    _is_grad_chain,
    is_test_file,
    periodic_test,
    empties_container,
)
from torchlint.analysis.scopes import (  # noqa: F401
    Scope,
    Loop,
    Context,
    Binding,
)
from torchlint.analysis.arguments import ArgumentQueries
from torchlint.analysis.attachment import AttachmentQueries
from torchlint.analysis.flow import ControlFlowQueries
from torchlint.analysis.grad import GradModeQueries
from torchlint.analysis.keeping import ACCUMULATES, STORES, KeepingQueries  # noqa: F401
from torchlint.analysis.inplace import InPlaceQueries, MovedLeafQueries
from torchlint.analysis.objects import ModuleQueries, OptimizerQueries, ScalerQueries, TensorQueries
from torchlint.analysis.summaries import SummaryQueries
from torchlint.analysis.uses import UseQueries
from torchlint.analysis.walk import ModuleWalk


class Analysis(
    ModuleWalk, GradModeQueries, ControlFlowQueries, AttachmentQueries, ModuleQueries,
    OptimizerQueries, InPlaceQueries, SummaryQueries, ArgumentQueries,
    ScalerQueries, MovedLeafQueries, TensorQueries, KeepingQueries, UseQueries,
):
    """Everything the rules may ask about one module."""
