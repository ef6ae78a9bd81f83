"""The offline runtime: the real program under Pulumi mocks, and the plan it yields as data, text and diff."""
