"""The answers: the step rules with their forward pass, and fresh inputs with reference
gradients. Trusted side only; the sandbox never sees this folder."""
