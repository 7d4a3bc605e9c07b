"""LimitedExecute: nbgrader's Execute, made safe for a batch. A kernel that does not start
is retried; one that dies (exit, segfault, memory limit), a submission that runs too long
or floods output costs that submission's remaining cells, with a clear message in them, and
never the batch or the grader's memory. Each kernel gets a socket folder of its own. The
sandbox itself comes from the kernel spec (grader/confine/); the grades come from the
replay (ReplayGrades) whatever happened here. Where the kernel would run without bubblewrap
(it cannot start here, or the kernel is not the kit's), no cell runs: the submission is not
graded, unless allow_unsandboxed (unsandboxed.py)."""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import Execute
from traitlets import Bool, Integer, default

from ..confine import default_sandbox, make_kernel_dir
from ..confine.probe import unsandboxed_allowed
from ..confine.warm import WarmProvisioner, warm_server
from ..replay.plan import kernel_prefix
from ..settings import (
    IOPUB_SECONDS,
    MAX_OUTPUT_BYTES,
    MAX_TOTAL_OUTPUT_BYTES,
    START_ATTEMPTS,
    SUBMISSION_SECONDS,
)
from . import prefix_block, show_only, test_blocks, unsandboxed
from .scope import instructor_notebook, kit_assignment


def _error(ename: str, text: str):
    return from_dict(
        {"output_type": "error", "ename": ename, "evalue": text, "traceback": [f"{ename}: {text}"]}
    )


__all__ = ["LimitedExecute"]


class LimitedExecute(Execute):
    max_output_bytes = Integer(
        MAX_OUTPUT_BYTES,
        help="Output kept per cell; the rest is dropped as it "
        "arrives, so a flood cannot fill the grader's memory.",
    ).tag(config=True)
    submission_timeout = Integer(
        SUBMISSION_SECONDS, help="Seconds for all the cells of one submission; cells after that are not run."
    ).tag(config=True)

    warm_kernels = Bool(
        True,
        help="Fork each kernel from a server that has imported torch once (grader/confine/warm.py) "
        "instead of starting a Python per submission. Same sandbox, limits and outputs; False: cold.",
    ).tag(config=True)

    allow_unsandboxed = Bool(
        help="Grade even where the kernel would run WITHOUT bubblewrap (it cannot start here, or the "
        "kernel is not the kit's): a loud warning instead of a refusal. Never where students can reach "
        "the grader. Default: BACKPROP_NINJA_ALLOW_UNSANDBOXED (grader/settings.py).",
    ).tag(config=True)

    run_show_only = Bool(
        False,
        help="Also run the code cells after the last graded or answer cell (grader/preprocessors/"
        "show_only.py): they cannot change a grade, and under the grader only show a briefly trained net.",
    ).tag(config=True)

    test_blocks = Bool(
        True,
        help="Run each block of consecutive hidden-test cells in one kernel round trip (grader/"
        "preprocessors/test_blocks.py): about 7 ms of message handling a cell saved. False: one at a time.",
    ).tag(config=True)

    @default("iopub_timeout")
    def _iopub_timeout(self):
        return IOPUB_SECONDS  # nbclient's 4 s lost a loaded grader's last outputs (grader/settings.py)

    @default("allow_unsandboxed")
    def _allow_from_environment(self):
        return unsandboxed_allowed()

    start_attempts = Integer(
        START_ATTEMPTS,
        help="Kernel starts to try before the cells are marked not run (the replay grades regardless).",
    ).tag(config=True)
    max_total_output_bytes = Integer(
        MAX_TOTAL_OUTPUT_BYTES,
        help="Output kept for the whole submission (added "
        "cells included); past it, outputs are dropped with a note.",
    ).tag(config=True)

    def preprocess(
        self, nb: NotebookNode, resources: ResourcesDict | None = None, km=None
    ) -> tuple[NotebookNode, ResourcesDict]:
        self._started, self._dead, self._sizes, self._total, self._noted = (
            time.monotonic(),
            None,
            {},
            0,
            set(),
        )
        self._cell_timeout, self._cells_started = self.timeout, 0
        self._show_only = set() if self.run_show_only else show_only.show_only(nb.cells)
        kit = self.test_blocks and kit_assignment(resources or {})
        self._blocks, self._given = test_blocks.blocks(nb.cells) if kit else {}, {}
        self._prefix: tuple[int, list[int]] = (0, [])  # a warm kernel's: create_kernel_manager
        name = self.kernel_name or nb.metadata.get("kernelspec", {}).get("name", "python")
        self._unsandboxed = unsandboxed.kernel_problem(name)
        unsandboxed.apply_rule(self._unsandboxed, allowed=self.allow_unsandboxed, log=self.log)
        for attempt in range(1, self.start_attempts + 1):
            self._kernel_home = None
            try:
                return super().preprocess(nb, resources, km)
            except (
                RuntimeError
            ) as e:  # jupyter_client: "Kernel didn't respond", "Kernel died before replying"
                if "Kernel" not in str(e) or self._cells_started:
                    raise
                self.log.warning(
                    "kernel did not start (attempt %d of %d): %s", attempt, self.start_attempts, e
                )
            finally:
                if self._kernel_home:  # its sockets and the scratch copy, whatever became of the kernel
                    shutil.rmtree(self._kernel_home, ignore_errors=True)
        for cell in nb.cells:
            if cell.cell_type == "code":
                cell.outputs = [_error("NotRun", "this cell was not run: the kernel could not be started")]
        return nb, resources

    def create_kernel_manager(self):
        """Each kernel gets a socket folder of its own, which only its sandbox can see: no
        other kernel, of this batch or another, can connect to its channels. A warm kernel's
        folder is its server's, emptied before each kernel."""
        km = super().create_kernel_manager()
        if km.transport != "ipc":
            return km
        runtime = os.environ.get("JUPYTER_RUNTIME_DIR") or None
        path = (self.resources or {}).get("metadata", {}).get("path")
        server = None
        if self.warm_kernels and path and kit_assignment(self.resources):  # its first cells, run once
            prefix, names_txt = self._source_prefix()
            server = warm_server(cwd=path, runtime_root=runtime, prefix=prefix, names_txt=names_txt)
        if server:
            km.ip = str(server.ipc / "kernel")
            km.kernel_id = str(uuid.uuid4())
            km.provisioner = WarmProvisioner(kernel_id=km.kernel_id, kernel_spec=km.kernel_spec, parent=km)
            km.provisioner.server = server
            self._prefix = prefix_block.members(self.nb.cells, server.prefix, server.skippable)
        elif getattr(self, "_unsandboxed", None) and unsandboxed.drops_root(km):
            self._kernel_home = unsandboxed.kernel_dir()  # allowed without bubblewrap: not as root
            unsandboxed.hand_over(km, self._kernel_home)
        else:
            self._kernel_home = make_kernel_dir(runtime)
            km.ip = str(self._kernel_home / "ipc" / "kernel")
        return km

    def _source_prefix(self) -> tuple[list[str], Path | None]:
        """The instructor's notebook's student-independent first cells, and its names.txt."""
        info = (self.resources or {}).get("nbgrader") or {}
        if not info.get("assignment") or not info.get("notebook"):
            return [], None
        coursedir = CourseDirectory(config=self.config)
        folder = Path(coursedir.root) / coursedir.source_directory / info["assignment"]
        source = folder / f"{info['notebook']}.ipynb"
        if not source.is_file():
            return [], None
        return kernel_prefix(instructor_notebook(source).cells), folder / "names.txt"

    def preprocess_cell(
        self, cell: NotebookNode, resources: ResourcesDict, index: int
    ) -> tuple[NotebookNode, ResourcesDict]:
        if cell.cell_type != "code":
            return cell, resources
        if index in self._show_only:
            cell.outputs, cell.execution_count = [show_only.note()], None
            return cell, resources
        given = (
            self._given.pop(index, None)
            or (self._block(index, resources) if index in self._blocks else None)
            or (self._take(index, resources) if self._prefix[1][:1] == [index] else None)
        )
        if given is not None:  # a cell run with its block (test_blocks.py, prefix_block.py)
            cell.outputs, cell.execution_count = given
            return cell, resources
        return self._execute(cell, resources, index)

    def _block(self, index: int, resources: ResourcesDict):
        """Runs the test block that starts at `index`: its first cell's outputs and count, the
        others' kept for their turn; None where the answer did not come back whole."""
        members = self._blocks.pop(index)
        block, nonce = test_blocks.block_cell([self.nb.cells[i].source for i in members])
        block = self._in_place(block, resources, index, len(members))
        outputs = test_blocks.split(block.outputs, nonce, len(members), block.execution_count)
        if outputs is None:
            return None
        self._given.update({i: (o, block.execution_count) for i, o in zip(members[1:], outputs[1:])})
        return outputs[0], block.execution_count

    def _take(self, index: int, resources: ResourcesDict):
        """The warm kernel's skippable first cells, from `index`, in one round trip that IPython
        does not count (prefix_block.py): this cell's outputs and count, the others' kept for their
        turn; None where the answer did not come back whole (each then runs on its own)."""
        (first, members), self._prefix = self._prefix, (0, [])
        block, nonce = prefix_block.block_cell(first, len(members))
        block = self._in_place(block, resources, index, len(members), counted=False)
        each = prefix_block.split(block.outputs, nonce, len(members), block.get("execution_count"))
        if each is None:
            return None
        self._given.update(zip(members[1:], each[1:]))
        return each[0]

    def _in_place(self, block: NotebookNode, resources: ResourcesDict, index: int, cells: int, **kw):
        """`block` run where the cell at `index` stands, for `cells` cells' time; the notebook as it was."""
        original = self.nb.cells[index]
        try:
            return self._execute(block, resources, index, cells=cells, **kw)[0]
        finally:
            self.nb.cells[index] = original  # nbclient puts the cell it ran in the notebook

    def _execute(
        self, cell: NotebookNode, resources: ResourcesDict, index: int, cells: int = 1, counted: bool = True
    ):
        left = self.submission_timeout - (time.monotonic() - self._started)
        if self._dead or left <= 0:
            why = self._dead or f"the submission's {self.submission_timeout} s were used up"
            cell.outputs = [_error("NotRun", f"this cell was not run: {why}")]
            return cell, resources
        self.timeout = max(1, int(min(cells * self._cell_timeout if self._cell_timeout else left, left)))
        self._cells_started += 1
        try:
            if counted:
                return super().preprocess_cell(cell, resources, index)
            self._check_assign_resources(resources)
            return self.execute_cell(cell, index, store_history=False), self.resources
        except DeadKernelError:
            self._dead = "the kernel died (an exit, a crash or the memory limit) in an earlier cell"
            cell.outputs.append(
                _error(
                    "DeadKernelError",
                    "the kernel died while running this cell (an exit, a crash or the memory limit)",
                )
            )
            return cell, resources
        finally:
            self.timeout = self._cell_timeout

    def output(self, outs, msg, display_id, cell_index):
        used = self._sizes.get(cell_index, 0)
        if used > self.max_output_bytes:  # noted already: the rest of a flood is not measured
            return None
        size = len(json.dumps(msg.get("content", {}), default=str))
        self._sizes[cell_index] = used + size
        if used + size > self.max_output_bytes:
            return self._drop(outs, cell_index, f"output truncated: over {self.max_output_bytes} bytes")
        if self._total + size > self.max_total_output_bytes:  # only what is kept counts
            return self._drop(
                outs,
                cell_index,
                "output dropped: the submission's outputs are over "
                f"{self.max_total_output_bytes} bytes in all",
            )
        self._total += size
        if msg.get("msg_type") == "error" and "No space left on device" in str(
            msg.get("content", {}).get("evalue")
        ):
            outs.append(
                from_dict(
                    {
                        "output_type": "stream",
                        "name": "stderr",
                        "text": (
                            "\n[the submission's disk space is used up: "
                            f"{default_sandbox().limits.disk_mb} MB for its folder and /tmp together]\n"
                        ),
                    }
                )
            )
        return super().output(outs, msg, display_id, cell_index)

    def _drop(self, outs, cell_index: int, why: str):
        if cell_index not in self._noted:  # one note per cell, however much more it prints
            self._noted.add(cell_index)
            # stderr: a stream of its own, neither merged into nor cut off with stdout; first, so
            # that nbgrader's LimitOutput, which drops every stream after its 1,000th line, keeps it
            outs.insert(0, from_dict({"output_type": "stream", "name": "stderr", "text": f"\n[{why}]\n"}))
        return None
