"""IPython extension: %%netesto and %netesto magics with ipywidgets progress."""
