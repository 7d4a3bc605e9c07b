"""What the TAs read after the batch: the grade table, the class report, the CSV exports for a
spreadsheet or an LMS, and the class's signs of cheating (copied answers among them)."""
