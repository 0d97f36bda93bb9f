"""faultline: root causes of GPU training-run interruptions from a cluster's own logs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("faultline")
except PackageNotFoundError:  # running from a checkout that was never installed
    __version__ = "0.0.0+unknown"
