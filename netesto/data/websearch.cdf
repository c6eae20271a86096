# Web search flow sizes: the CDF of the DCTCP paper's measurements of a production web-search cluster
# (M. Alizadeh et al., "Data Center TCP (DCTCP)", SIGCOMM 2010), as the pFabric, PIAS and
# HPCC simulations use it (the DCTCP_CDF file of github.com/datacenter/empirical-traffic-gen, HPCC's
# WebSearch_distribution.txt). Values in bytes, then the share of flows of at most that size.
# Mean 1.71 MB, largest 30 MB: a lab of tens of Mbit/s carries it in seconds only scaled down,
# e.g. cdf(websearch,scale=0.01) (mean 17.1 kB, largest 300 kB). See docs/workloads.md.
0         0
10000     0.15
20000     0.20
30000     0.30
50000     0.40
80000     0.53
200000    0.60
1000000   0.70
2000000   0.80
5000000   0.90
10000000  0.97
30000000  1
