"""Submissions coming in: from an LMS's zip, the course-local nbgrader exchange or the sample
class into submitted/, and made safe and readable there before nbgrader copies or reads them."""
