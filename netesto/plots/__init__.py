"""holoviews plot builders (time series, summaries) with the bokeh backend."""
