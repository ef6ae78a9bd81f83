"""A fleet of local control planes: a manager and its workers side by side on one machine (members.py)."""
