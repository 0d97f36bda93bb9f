"""faultline: root causes of GPU training-run interruptions from a cluster's own logs."""

from __future__ import annotations


def __getattr__(name: str) -> str:
    """``__version__``, read from the installed metadata when first asked for:
    ``importlib.metadata`` costs about 50 ms at import, which every command paid before
    its first line (``faultline --help`` needs no version)."""
    if name != "__version__":
        raise AttributeError(f"module 'faultline' has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("faultline")
    except PackageNotFoundError:  # running from a checkout that was never installed
        found = "0.0.0+unknown"
    globals()["__version__"] = found
    return found
