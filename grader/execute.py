"""nbgrader's Execute, made safe for a batch: a kernel that dies (exit, segfault, memory
limit) or a submission that runs too long or floods output costs that submission's
remaining cells, with a clear message in them, and never the batch or the grader's memory.
The grades come from the replay (ReplayGrades) whatever happened here."""
from __future__ import annotations

import json
import time

from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import from_dict
from nbgrader.preprocessors import Execute
from traitlets import Integer


def _error(ename: str, text: str):
    return from_dict({"output_type": "error", "ename": ename, "evalue": text,
                      "traceback": [f"{ename}: {text}"]})


class SandboxedExecute(Execute):
    max_output_bytes = Integer(2_000_000, help="Output kept per cell; the rest is dropped as it "
                               "arrives, so a flood cannot fill the grader's memory.").tag(config=True)
    submission_timeout = Integer(900, help="Seconds for all the cells of one submission; cells "
                                 "after that are not run.").tag(config=True)

    start_attempts = Integer(3, help="Kernel starts to try before the cells are marked not run "
                             "(the replay grades regardless).").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._started, self._dead, self._sizes = time.monotonic(), None, {}
        self._cell_timeout, self._cells_started = self.timeout, 0
        for attempt in range(1, self.start_attempts + 1):
            try:
                return super().preprocess(nb, resources, km)
            except RuntimeError as e:  # jupyter_client: "Kernel didn't respond", "Kernel died before replying"
                if "Kernel" not in str(e) or self._cells_started:
                    raise
                self.log.warning("kernel did not start (attempt %d of %d): %s", attempt, self.start_attempts, e)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [_error("NotRun", "this cell was not run: the kernel could not be started")]
        return nb, resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code":
            return cell, resources
        left = self.submission_timeout - (time.monotonic() - self._started)
        if self._dead or left <= 0:
            why = self._dead or f"the submission's {self.submission_timeout} s were used up"
            cell.outputs = [_error("NotRun", f"this cell was not run: {why}")]
            return cell, resources
        self.timeout = max(1, int(min(self._cell_timeout or left, left)))
        self._cells_started += 1
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._dead = "the kernel died (an exit, a crash or the memory limit) in an earlier cell"
            cell.outputs.append(_error("DeadKernelError", "the kernel died while running this cell "
                                       "(an exit, a crash or the memory limit)"))
            return cell, resources
        finally:
            self.timeout = self._cell_timeout

    def output(self, outs, msg, display_id, cell_index):
        size = len(json.dumps(msg.get("content", {}), default=str))
        used = self._sizes.get(cell_index, 0)
        self._sizes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            if used <= self.max_output_bytes:
                # stderr: a stream of its own, so it is neither merged into nor cut off with stdout
                outs.append(from_dict({"output_type": "stream", "name": "stderr",
                                       "text": f"\n[output truncated: over {self.max_output_bytes} bytes]\n"}))
            return None
        return super().output(outs, msg, display_id, cell_index)
