"""nbgrader exercise kit."""
