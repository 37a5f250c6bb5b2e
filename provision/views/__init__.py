"""Views: rendering of results as tables, JSON and Markdown."""
