"""kerasfit's built-in rule pack: one module per rule (installed as ``kerasfit.rules``)."""
