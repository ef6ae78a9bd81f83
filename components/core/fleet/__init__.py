"""A fleet of clusters behind one queue (Kueue MultiKueue): the workers a manager reads, what each side renders."""
