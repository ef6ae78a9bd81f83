"""One thin module per CLI verb: parse the arguments, call offline/, account/ or deployed/, print."""
