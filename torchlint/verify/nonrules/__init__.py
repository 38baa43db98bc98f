"""Measured programs for guide claims that the measurements refute (documented non-rules).

They are programs for the verifier's probe, loaded by path; nothing imports them as modules.
"""
