"""The controller<->agent wire protocol: message dataclasses, codec, versions."""

from netesto.protocol.codec import CHUNK_SIZE, DEFAULT_MAX_MESSAGE, decode, encode
from netesto.protocol.messages import COMMANDS, EVENTS, ErrorInfo, Event, Message, Reply, Request
from netesto.protocol.version import PROTOCOL_VERSION, check_compatible, parse_version

__all__ = [
    "CHUNK_SIZE",
    "COMMANDS",
    "DEFAULT_MAX_MESSAGE",
    "EVENTS",
    "ErrorInfo",
    "Event",
    "Message",
    "PROTOCOL_VERSION",
    "Reply",
    "Request",
    "check_compatible",
    "decode",
    "encode",
    "parse_version",
]
