"""Backprop Ninja's answers: its step rules (rules.py), its named mistakes (mistakes.py), its
demo class (samples.py). Trusted side only."""
