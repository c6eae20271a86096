"""CURVE key files: the z85 key pairs both sides of the wire load (``zmq.auth`` certificates)."""

from __future__ import annotations

from pathlib import Path

import zmq.auth

from netesto.errors import UsageError


def load_secret_key(path: str | Path, name: str | None = None) -> tuple[bytes, bytes]:
    """``(public, secret)`` z85 keys from a ``.key_secret`` file or a directory holding one.

    In a directory, ``<name>.key_secret`` is used when ``name`` is given, else
    the only ``*.key_secret`` there, else ``agent.key_secret``.
    """
    p = Path(path)
    if p.is_dir():
        if name:
            p = p / f"{name}.key_secret"
        else:
            found = sorted(p.glob("*.key_secret"))
            p = found[0] if len(found) == 1 else p / "agent.key_secret"
    if not p.is_file():
        raise UsageError(f"no secret key file {p} (create one with 'netesto keys DIR --name NAME')")
    public, secret = _load(p)
    if not secret:
        raise UsageError(f"{p} holds no secret key (is it a public .key file?)")
    return public, secret


def load_public_key(path_or_key: str | bytes | Path) -> bytes:
    """A z85 public key from a ``.key`` file, or the key itself (40 z85 characters)."""
    if isinstance(path_or_key, bytes) and len(path_or_key) == 40:
        return path_or_key
    text = str(path_or_key)
    if len(text) == 40 and not Path(text).exists():
        return text.encode()
    p = Path(text)
    if not p.is_file():
        raise UsageError(f"no public key file {p}")
    public, _ = _load(p)
    return public


def _load(path: Path) -> tuple[bytes, bytes | None]:
    try:
        return zmq.auth.load_certificate(str(path))
    except (OSError, ValueError) as exc:  # zmq.auth says ValueError for a file that holds no key
        raise UsageError(f"cannot read the key file {path}: {exc}") from exc


__all__ = ["load_public_key", "load_secret_key"]
