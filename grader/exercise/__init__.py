"""The exercise, defined once, with nothing secret in it: the sandbox sees this folder."""
