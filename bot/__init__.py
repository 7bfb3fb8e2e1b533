"""The application: CLI, campaign orchestration, forges, agents and rendering."""
