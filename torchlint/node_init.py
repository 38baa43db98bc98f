"""Faster ``__init__`` methods for libcst's node classes, doing exactly what theirs do.

libcst's nodes are frozen dataclasses: the ``__init__`` that ``dataclasses`` writes for them
sets each field with ``object.__setattr__(self, "name", value)``, which looks the name up
along the class's bases on every call. The parser builds every node through that ``__init__``
(a sixth of a parse). The ``__init__`` written here sets a slotted field through its slot
descriptor, held in a closure, and any other field straight into the instance's ``__dict__``
(where ``object.__setattr__`` puts it: no field is a data descriptor, which is checked), takes
the same parameters with the same defaults and default factories, and ends with the same
``self.__post_init__()`` (unless ``validation.on`` is off: while torchlint parses). A class
with a field this does not cover (``init=False``, keyword-only, an ``InitVar``) keeps its own
``__init__``, and so does a node class defined after ``install``. Measured on timm: parses 6%
faster. ``ORIGINAL_INITS`` keeps the replaced methods (the tests compare the two).
"""

from __future__ import annotations

import dataclasses
import threading

_lock = threading.Lock()
_installed = False
ORIGINAL_INITS: dict[type, object] = {}  # the classes given a new __init__, with their own


def install() -> None:
    """Give every libcst node class the faster ``__init__`` (once per process)."""
    global _installed
    if _installed:
        return
    with _lock:
        if _installed:
            return
        import libcst

        pending = [libcst.CSTNode]
        seen = set()
        while pending:
            cls = pending.pop()
            for sub in cls.__subclasses__():
                if sub not in seen:
                    seen.add(sub)
                    pending.append(sub)
        for cls in seen:
            if "__init__" in cls.__dict__ and dataclasses.is_dataclass(cls):
                init = _fast_init(cls)
                if init is not None:
                    ORIGINAL_INITS[cls] = cls.__dict__["__init__"]
                    cls.__init__ = init
        _installed = True


# "use the default factory": dataclasses' own sentinel, which its __init__ also accepts passed
# explicitly (inspect.signature shows it as the default: hypothesis' builds() passes it)
_NO_VALUE = getattr(dataclasses, "_HAS_DEFAULT_FACTORY", None)


class _Validation:
    """Whether the new ``__init__`` methods call ``__post_init__`` (libcst's ``_validate``):
    off only while torchlint's parser builds a tree (``engine._unvalidated_nodes``)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


validation = _Validation()


def _fast_init(cls):
    """The ``__init__`` for ``cls``, or None where its fields are not all plain ones."""
    if _NO_VALUE is None:
        return None  # a Python whose dataclasses differ: keep theirs
    fields = dataclasses.fields(cls)  # the init fields and others, not ClassVars (__slots__) nor InitVars
    initvar = getattr(dataclasses, "_FIELD_INITVAR", None)
    if initvar is None or any(getattr(field, "_field_type", initvar) is initvar
                              for field in cls.__dataclass_fields__.values()):
        return None  # an InitVar goes to __post_init__: not covered
    namespace: dict[str, object] = {"_NO_VALUE": _NO_VALUE, "_validation": validation}
    has_dict = any("__dict__" in base.__dict__ for base in cls.__mro__[:-1])  # (object's is not one)
    parameters, body = [], []
    for field in fields:
        name = field.name
        if not field.init or getattr(field, "kw_only", False) or not name.isidentifier():
            return None
        if field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{name}"] = field.default_factory
            parameters.append(f"{name}=_NO_VALUE")
            body.append(f"    if {name} is _NO_VALUE:\n        {name} = _factory_{name}()")
        elif field.default is not dataclasses.MISSING:
            namespace[f"_default_{name}"] = field.default
            parameters.append(f"{name}=_default_{name}")
        elif parameters and "=" in parameters[-1]:
            return None  # a field without a default after one with: not a valid dataclass anyway
        else:
            parameters.append(name)
        # where object.__setattr__ puts it: the first class attribute of that name decides
        found = next((base.__dict__[name] for base in cls.__mro__ if name in base.__dict__), None)
        if type(found) is _MEMBER_DESCRIPTOR:  # a slot
            namespace[f"_set_{name}"] = found.__set__
            body.append(f"    _set_{name}(self, {name})")
        elif hasattr(type(found), "__set__") or not has_dict:
            return None  # another data descriptor, or nowhere else to put it: not covered
        else:
            body.append(f"    self.__dict__[{name!r}] = {name}")
    body.append("    if _validation.on:\n        self.__post_init__()")
    source = f"def __init__(self, {', '.join(parameters)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<torchlint fast __init__ of {cls.__name__}>", "exec"), namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__dict__["__init__"].__doc__
    return init


class _Slotted:
    __slots__ = ("slot",)


_MEMBER_DESCRIPTOR = type(_Slotted.__dict__["slot"])
