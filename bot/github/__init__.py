"""GitHub mode: the webhook app, its commands, and the GitHub side of the Forge."""
