"""The operator CLI, `python -m bootstrap <verb>`: verbs/ over offline/ (mock runtime, plan), account/ (AWS checks), deployed/ (stack operations)."""
