"""Agents: who proposes the next candidate."""
