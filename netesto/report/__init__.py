"""HTML reports rendered from report_templates/ with Jinja2."""

from netesto._importcost import defer_rfc3987_syntax

defer_rfc3987_syntax()  # nbconvert and the figures' notebooks import nbformat: seconds saved per report
