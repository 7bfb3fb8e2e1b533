"""A campaign's state: the fold of its ledger events and the views read from it."""
