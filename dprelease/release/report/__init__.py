"""`report.md` of a release: the sections every kind shares, figures, one module per kind."""
