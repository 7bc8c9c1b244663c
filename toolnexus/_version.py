"""The installed version of toolnexus (from the package metadata)."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__: str = version("toolnexus")
except PackageNotFoundError:  # a checkout on sys.path, not installed: say so, not a fake number
    __version__ = "0+unknown"
