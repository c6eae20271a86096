"""papermill sweeps over parameterized notebooks."""
