"""The trusted side of the replay: which cells run in which runs (plan), sending them to the
sandboxed server (client, run), and validating each result (results, tensors)."""
