"""``netesto keys DIR --name NAME``: create a CURVE key pair (NAME.key public, NAME.key_secret secret)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from netesto.errors import UsageError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", type=Path, help="directory for the key files (created if missing)")
    parser.add_argument("--name", action="append", required=True,
                        help="key pair name, e.g. controller or the host name (repeatable)")
    parser.add_argument("--force", action="store_true", help="overwrite existing key files")


def create_keys(directory: Path, name: str, *, force: bool = False) -> tuple[Path, Path]:
    """Create ``<dir>/<name>.key`` and ``<dir>/<name>.key_secret`` (secret file mode 0600)."""
    import zmq.auth

    if not name or "/" in name or name.startswith("."):
        raise UsageError(f"bad key name {name!r}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{directory}: cannot create the key directory: {exc.strerror or exc}") from exc
    public, secret = directory / f"{name}.key", directory / f"{name}.key_secret"
    if not force and (public.exists() or secret.exists()):
        raise UsageError(f"{public} or {secret} already exists (use --force to replace it)")
    made_public, made_secret = zmq.auth.create_certificates(str(directory), name)
    os.chmod(made_secret, 0o600)
    return Path(made_public), Path(made_secret)


def main(args: argparse.Namespace) -> int:
    for name in args.name:
        public, secret = create_keys(args.dir, name, force=args.force)
        print(f"{name}: public {public}  secret {secret}")
    return 0
