"""The netesto-agent daemon: ZeroMQ server, auth, command handlers, result store, host control."""
