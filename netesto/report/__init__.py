"""HTML reports rendered from report_templates/ with Jinja2."""
