"""Results: raw flow data -> xarray Datasets, all.exp.out, exp.csv, analysis."""
