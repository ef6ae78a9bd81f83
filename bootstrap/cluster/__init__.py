"""A live cluster through the `kubernetes` client: connect, read, create, delete, logs (the job verbs and doctor)."""
