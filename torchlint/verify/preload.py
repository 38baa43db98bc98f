"""Imported once by the verifier's fork server, before it forks a process per fixture.

It imports torch and everything a fixture's first optimizer step would import lazily
(``torch._dynamo`` and sympy, about 1 s), then freezes the garbage collector's view of all of it:
frozen objects are never scanned again, so a child's ``gc.collect()`` neither spends ~0.1 s
walking torch's ~300k objects nor writes to (and so copies) the pages it shares with the server.
"""

import gc

import torchlint.verify.probe  # noqa: F401  (imports torch and torch._dynamo)

gc.collect()
gc.freeze()
