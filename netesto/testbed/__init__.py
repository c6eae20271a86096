"""A lab on one machine: network namespaces, a bottleneck router, agents inside."""
