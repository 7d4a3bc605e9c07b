"""The exercises, one definition a module (grader/exercise/definition.py says what one holds)."""
