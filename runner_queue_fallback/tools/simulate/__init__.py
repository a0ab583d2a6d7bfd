"""`simulate`: the action's real steps against the fake GitHub, on virtual time."""
