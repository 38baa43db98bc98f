"""The runtime verifier (``torchlint verify``). Needs torch; never imported by the lint path.

Importing this package is light: torch is imported by the modules that measure (``tracker``,
``probe``, ``verifier``), and only once ``cli.main`` has checked that it is installed.
"""
