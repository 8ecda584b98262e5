"""Analyses rules ask through the FileContext facade (never imported by rules directly)."""
