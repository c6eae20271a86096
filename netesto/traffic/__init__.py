"""Flow engines ("drivers"), TCP_INFO samplers, ping and host-statistics collectors."""
