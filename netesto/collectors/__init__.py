"""What an agent measures besides its flows' bytes: TCP_INFO, ping RTTs, CPU time, host statistics."""
