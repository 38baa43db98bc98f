"""torchlint: static checks for PyTorch memory and autograd mistakes."""

__version__ = "0.1.0"
