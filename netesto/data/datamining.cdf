# Data mining flow sizes: the CDF of the VL2 paper's measurements of a data-mining cluster
# (A. Greenberg et al., "VL2: A Scalable and Flexible Data Center Network", SIGCOMM 2009),
# as the pFabric and PIAS simulations use it (the VL2_CDF file of
# github.com/datacenter/empirical-traffic-gen). Values in bytes, then the share of flows of at most
# that size. Most flows are tiny, a few are huge: mean 12.7 MB, largest 1 GB; a lab of tens of
# Mbit/s carries it in seconds only scaled down, e.g. cdf(datamining,scale=0.001) (mean 12.7 kB,
# largest 1 MB). See docs/workloads.md.
0           0
180         0.1
216         0.2
560         0.3
900         0.4
1100        0.5
1870        0.6
3160        0.7
10000       0.8
400000      0.9
3160000     0.95
100000000   0.98
1000000000  1
