"""Rule discovery: every ``tl<NNN>_<name>.py`` module in this package holds one rule class."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from torchlint.rule import Rule


@lru_cache(maxsize=None)
def all_rules() -> tuple[type[Rule], ...]:
    found: list[type[Rule]] = []
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("tl"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                found.append(value)
    return tuple(sorted(found, key=lambda rule: rule.CODE))


def rules_by_code() -> dict[str, type[Rule]]:
    return {rule.CODE: rule for rule in all_rules()}


def default_rules() -> tuple[type[Rule], ...]:
    return tuple(rule for rule in all_rules() if rule.ENABLED_BY_DEFAULT)
