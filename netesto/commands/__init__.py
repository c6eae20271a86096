"""Subcommands of the ``netesto`` command line, one module each (add_arguments + main)."""
