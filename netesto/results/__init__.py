"""Results: raw flow data -> xarray Datasets, all.exp.out, exp.csv, analysis."""

from __future__ import annotations

from netesto.results.analysis import Table, figure8
from netesto.results.dataset import build_dataset
from netesto.results.expcsv import aggregate, append_rows, load_fields, parse_fields
from netesto.results.fct import fct_compare, fct_table
from netesto.results.fairness import (
    convergence_time,
    fairness_by,
    jain_index,
    max_min_ratio,
    window_goodput,
)
from netesto.results.load import load_experiment
from netesto.results.process import ProcessResult, process_experiment
from netesto.results.schema import SCHEMA_VERSION
from netesto.results.storage import Experiments, open_experiment, open_experiments, write_netcdf
from netesto.results.sweep import combine, concat_flows, grid

__all__ = [
    "Experiments",
    "ProcessResult",
    "SCHEMA_VERSION",
    "Table",
    "aggregate",
    "append_rows",
    "build_dataset",
    "combine",
    "concat_flows",
    "convergence_time",
    "fairness_by",
    "fct_compare",
    "fct_table",
    "figure8",
    "grid",
    "jain_index",
    "load_experiment",
    "load_fields",
    "max_min_ratio",
    "open_experiment",
    "open_experiments",
    "parse_fields",
    "process_experiment",
    "window_goodput",
    "write_netcdf",
]
