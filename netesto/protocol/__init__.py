"""The controller<->agent wire protocol: message dataclasses, codec, versions."""
