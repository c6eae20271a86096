"""The package version and the wire-protocol version (which changes separately)."""

__version__ = "0.1.0"
