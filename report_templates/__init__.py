"""Jinja2 templates for experiment and sweep reports, packaged with netesto."""
