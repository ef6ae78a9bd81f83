"""The config as text: a stack file read as the Pulumi CLI reads it (yaml.v3's typing, duplicate keys, bounded
size and aliases), the engine's strings of numbers and booleans, and the patterns editors and the program share."""
