"""Report: machine x profile gates and environment reports."""
