"""The GPT block's answers beyond autograd's: its named mistakes (mistakes.py). Trusted side only."""
