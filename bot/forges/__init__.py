"""Forges: where candidate pull requests, comments, checks and merges live."""
