"""The package version (the wire-protocol version is separate: netesto.protocol.version)."""

__version__ = "0.1.0"
