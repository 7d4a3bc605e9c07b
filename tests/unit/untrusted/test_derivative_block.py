"""grader/untrusted/derivative_block.py in-process: install() switches torch's derivative code off
(every operator's autograd kernel a fallthrough, every derivative operator refused, torch's Python
derivative helpers refused) and lift() switches it back on. One install for the whole module, and
lift() in its teardown, checked: the suite's other tests see torch as it ships. seal() is never
called here: it cannot be taken back (the forked tests of test_autograd_guard.py seal)."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import types

import pytest
import torch
import torch.nn.functional as F

from grader.exercise.definitions.backprop_ninja import network
from grader.reference.backprop_ninja import rules
from grader.untrusted import derivative_block
from grader.untrusted.derivative_block import DERIVATIVE, UNAVAILABLE, AutogradUnavailable

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")

# What the lecture's answers are made of: a derivative refused here would fail honest work.
LECTURE_FORWARD = {
    "aten::tanh",
    "aten::mm",
    "aten::addmm",
    "aten::sum.dim_IntList",
    "aten::exp",
    "aten::log",
    "aten::max.dim",
    "aten::embedding",
    "aten::cross_entropy_loss",
    "aten::native_batch_norm",
    "aten::retain_grad",
    "aten::retains_grad",
    "aten::requires_grad_",
}
# What the lecture's backward pass is in torch: each a way to copy an answer.
LECTURE_DERIVATIVES = {
    "aten::tanh_backward",
    "aten::_log_softmax_backward_data",
    "aten::_softmax_backward_data",
    "aten::nll_loss_backward",
    "aten::native_batch_norm_backward",
    "aten::embedding_dense_backward",
    "aten::convolution_backward",
    "aten::_make_dual",
}
# Derivative operators that cannot be called from Python (none in this torch: every one can,
# through torch.ops; name one here with the reason if a torch release adds such an op).
NOT_CALLABLE: dict[str, str] = {}
# Python modules that bind operators as functions (torch._C._nn binds no derivative in this torch).
BINDINGS = (torch, torch._VF, torch._C._VariableFunctions, torch._C._nn, torch._C._linalg, torch._C._special)
SCALARS = {
    "IntType": 1,
    "SymIntType": 1,
    "FloatType": 1.0,
    "BoolType": False,
    "NumberType": 1,
    "StringType": "none",
    "ScalarTypeType": torch.float32,
}
MODES = {
    "default": contextlib.nullcontext,
    "no_grad": torch.no_grad,
    "enable_grad": torch.enable_grad,
    "inference_mode": torch.inference_mode,
}


@pytest.fixture(scope="module")
def shipped():
    """What torch as it ships computes and has, taken before install(); then install() for the
    module, and after it lift(), with torch checked to be itself again (graphs, derivative ops,
    helpers' code). CALLS is emptied: the forked tests of the guard would report these calls."""
    # forward_ad.make_dual imports this on first use; imported while torch._decomp's code is
    # torch's, so that make_dual reaches aten::_make_dual (after install() the import is refused).
    import torch._decomp.decompositions_for_jvp  # noqa: F401

    before = types.SimpleNamespace(
        forward=_lecture_forward(),
        grads=_autograd_grads(),
        composite=[
            n
            for n in derivative_block.derivative_ops()
            if torch._C._dispatch_has_kernel_for_dispatch_key(n, "CompositeImplicitAutograd")
        ],
        refs=_refs_functions(),
        codes=_decomposition_codes(),
    )
    try:
        derivative_block.install()
        yield before
    finally:
        derivative_block.lift()
        derivative_block.CALLS.clear()
    g, y = torch.ones(2, 3), torch.full((2, 3), 0.5)
    assert torch.allclose(torch.ops.aten.tanh_backward(g, y), g * (1 - y * y))
    assert torch.allclose(
        torch._decomp.decomposition_table[torch.ops.aten.tanh_backward.default](g, y), g * 0.75
    )
    conv1d_input = sys.modules["torch.nn.grad"].conv1d_input
    assert conv1d_input((1, 1, 3), torch.ones(1, 1, 2), torch.ones(1, 1, 2)).shape == (1, 1, 3)
    left = [n for n in [*derivative_block.derivative_ops(), *LECTURE_FORWARD] if "/dev/null:0" in dump(n)]
    assert left == []
    with torch.enable_grad():
        w = torch.ones(3, requires_grad=True)
        loss = (w * 2).tanh().sum()
        assert loss.grad_fn is not None
        (dw,) = torch.autograd.grad(loss, w)
        assert torch.allclose(dw, 2 * (1 - torch.tanh(torch.tensor(2.0)) ** 2).expand(3))
        _, tangent = torch.func.jvp(torch.sin, (torch.zeros(2),), (torch.ones(2),))
        assert torch.equal(tangent, torch.ones(2))
    assert derivative_block.CALLS == []


# ---------------------------------------------------------------- helpers
def _batch():
    params, g = network.init_params()
    Xb = torch.randint(0, 27, (32, 3), generator=g)
    Yb = torch.randint(0, 27, (32,), generator=g)
    return params, Xb, Yb


def _lecture_forward() -> dict[str, torch.Tensor]:
    """The lecture's forward pass, by hand and by torch's functions, with the parameters requiring
    grad under enable_grad (where torch as it ships records a graph): every value, detached."""
    params, Xb, Yb = _batch()
    n = Xb.shape[0]
    with torch.enable_grad():
        p = {k: t.clone().requires_grad_() for k, t in params.items()}
        out = {}
        out["emb"] = emb = p["C"][Xb]
        out["embcat"] = embcat = emb.view(emb.shape[0], -1)
        out["hprebn"] = hprebn = embcat @ p["W1"] + p["b1"]
        out["bnmeani"] = bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        out["bndiff"] = bndiff = hprebn - bnmeani
        out["bnvar"] = bnvar = 1 / (n - 1) * (bndiff**2).sum(0, keepdim=True)
        out["bnvar_inv"] = bnvar_inv = (bnvar + 1e-5) ** -0.5
        out["bnraw"] = bnraw = bndiff * bnvar_inv
        out["hpreact"] = hpreact = p["bngain"] * bnraw + p["bnbias"]
        out["h"] = h = torch.tanh(hpreact)
        out["logits"] = logits = h @ p["W2"] + p["b2"]
        out["norm_logits"] = norm_logits = logits - logits.max(1, keepdim=True).values
        out["counts"] = counts = norm_logits.exp()
        out["probs"] = probs = counts * counts.sum(1, keepdim=True) ** -1
        out["loss"] = -probs.log()[range(n), Yb].mean()
        out["cross_entropy"] = F.cross_entropy(logits, Yb)
        out["mean_var"] = (hprebn - hprebn.mean(0, keepdim=True)) / (
            hprebn.var(0, keepdim=True) + 1e-5
        ) ** 0.5
        out["batch_norm"] = F.batch_norm(hprebn, None, None, p["bngain"][0], p["bnbias"][0], training=True)
        out["addmm"] = torch.addmm(p["b1"], embcat, p["W1"])
        out["embedding"] = F.embedding(Xb, p["C"])
        out["log_softmax"] = F.log_softmax(logits, 1)
        for k, t in network.cross_entropy_forward(params, Xb, Yb, track=True).items():
            out[f"ex4.{k}"] = t
        for k, t in rules.forward(params, Xb, Yb).items():
            out[f"steps.{k}"] = t
    return {k: t.detach().clone() for k, t in out.items() if isinstance(t, torch.Tensor)}


def _autograd_grads() -> types.SimpleNamespace:
    """Autograd's values and gradients for the lecture's batch, as torch ships."""
    params, Xb, Yb = _batch()
    values, grads = rules.autograd_grads(params, Xb, Yb)
    return types.SimpleNamespace(params=params, Yb=Yb, values=values, grads=grads)


def _chain(fn):
    """fn and what it wraps (functools.wraps's __wrapped__), down to the innermost function."""
    while isinstance(fn, types.FunctionType):
        yield fn
        fn = getattr(fn, "__wrapped__", None)


def _refs_functions() -> list[types.FunctionType]:
    """Every function of torch._refs whose code is in torch._refs's own files (the decorated
    ones unwrapped), taken while their code is still torch's."""
    files = {p for p in derivative_block.derivative_files() if p.endswith(".py") and "_refs" in p}
    found: dict[int, types.FunctionType] = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("torch._refs") and module is not None:
            for value in list(vars(module).values()):
                for f in _chain(value):
                    if os.path.realpath(f.__code__.co_filename) in files:
                        found[id(f)] = f
    return list(found.values())


def _decomposition_codes() -> dict:
    """The code of every function of torch._decomp's tables (and what they wrap), as shipped."""
    tables = [torch._decomp.decomposition_table, *torch._decomp.global_decomposition_table.values()]
    return {f: f.__code__ for table in tables for fn in table.values() for f in _chain(fn)}


def overload(name: str) -> torch._ops.OpOverload:
    """The OpOverload torch.ops resolves `name` to (by getattr, so torch's own cached object:
    __getattr__ would make a new one and orphan the decomposition tables' keys)."""
    ns, _, rest = name.partition("::")
    op, _, overload_name = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, ns), op), overload_name or "default")


class Unbuildable(TypeError):
    pass


def value(arg):
    """A value of arg's schema type: which one does not matter, a refusal comes before any check."""
    t = arg.real_type
    kind = t.kind()
    if kind == "OptionalType":
        return None
    if kind == "TensorType":
        return torch.empty(0) if arg.is_out else torch.ones(2, 2)
    if kind == "ListType":
        element = t.getElementType().kind()
        if element == "TensorType":
            return [torch.empty(0) if arg.is_out else torch.ones(2, 2)]
        if element == "BoolType":
            return [True] * (arg.N or 1)
        if element in ("IntType", "SymIntType"):
            return [1] * (arg.N or 2)
    if kind in SCALARS:
        return SCALARS[kind]
    raise Unbuildable(f"{arg.name}: {t}")


def arguments(op: torch._ops.OpOverload) -> tuple[list, dict]:
    args, kwargs = [], {}
    for arg in op._schema.arguments:
        if arg.kwarg_only:
            kwargs[arg.name] = value(arg)
        else:
            args.append(value(arg))
    return args, kwargs


def dump(name: str) -> str:
    """The dispatcher's registrations for `name`, each with where it was registered."""
    return torch._C._dispatch_dump(name)


def ours(name: str, key: str) -> bool:
    """Whether the kernel the dispatcher runs for `name` at `key` is one install() registered
    (torch._C._dispatch_library with no file: "/dev/null:0"). Checked before a call, so that a
    missing refusal fails a test instead of running torch's kernel on dummy arguments (which
    can crash the process)."""
    for line in dump(name).splitlines():
        if line.startswith((f"{key}: ", f"{key}[alias]: ")):
            return "registered at /dev/null:0 " in line
    return False


def unrefused(call, key: str = "CPU") -> tuple[list[str], list[str]]:
    """call(name, op, args, kwargs) for every derivative operator: those not refused by a
    refusal naming them (with what happened instead), and those whose arguments could not be
    built. Only called where install()'s kernel is the one at `key`."""
    wrong, unbuildable = [], []
    for name in derivative_block.derivative_ops():
        if name in NOT_CALLABLE:
            continue
        if not ours(name, key):
            wrong.append(f"{name}: not install()'s kernel at {key} (not called)")
            continue
        op = overload(name)
        try:
            args, kwargs = arguments(op)
        except Unbuildable as e:
            unbuildable.append(f"{name} ({e})")
            continue
        try:
            call(name, op, args, kwargs)
        except AutogradUnavailable as e:
            if not str(e).startswith(f"{name} ") or UNAVAILABLE not in str(e):
                wrong.append(f"{name}: refused as {e}")
        except Exception as e:  # noqa: BLE001 - reported
            wrong.append(f"{name}: {type(e).__name__}: {e}")
        else:
            wrong.append(f"{name}: computed")
    return wrong, unbuildable


def refused(call, *args, **kwargs) -> str:
    """The message of the AutogradUnavailable call raises (the test fails if it raises none)."""
    with pytest.raises(AutogradUnavailable) as e:
        call(*args, **kwargs)
    assert UNAVAILABLE in str(e.value)
    return str(e.value)


def helper_refused(call, *args, **kwargs) -> str:
    """The message of the refusal a Python derivative helper's replaced code raises."""
    with pytest.raises(RuntimeError, match=re.escape(UNAVAILABLE)) as e:
        call(*args, **kwargs)
    return str(e.value)


def base_name(name: str) -> str:
    return name.partition("::")[2].partition(".")[0]


# ---------------------------------------------------------------- the op list
def test_the_op_list_is_torchs_own_registered_derivatives():
    registered = set(torch._C._dispatch_get_all_op_names())
    ops = derivative_block.derivative_ops()
    assert ops == sorted(set(ops))
    assert [n for n in ops if n not in registered] == []
    assert [n for n in ops if not DERIVATIVE.search(base_name(n))] == []
    assert set(ops) >= LECTURE_DERIVATIVES
    # every registered `*backward*` operator, in whatever namespace
    assert {n for n in registered if "backward" in base_name(n)} <= set(ops)


def test_each_operators_kernels_are_the_dispatchers_answers_operator_by_operator():
    """install() asks the dispatcher for each key's operators, once a key: the same answers as
    asking of each operator at each key (every key for the derivative operators it refuses, the
    autograd keys for all it makes a fallthrough)."""
    keys = derivative_block.AUTOGRAD_KEYS + derivative_block.KERNEL_KEYS
    found = derivative_block._kernels_by_op(keys)
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    for name in derivative_block.derivative_ops():
        assert found.get(name, set()) == {k for k in keys if has(name, k)}, name
    for name in torch._C._dispatch_get_all_op_names():
        autograd = {k for k in derivative_block.AUTOGRAD_KEYS if has(name, k)}
        assert found.get(name, set()) & set(derivative_block.AUTOGRAD_KEYS) == autograd, name
    assert sum(bool(v) for v in found.values()) > 2000  # CPU kernels and composites: not an empty list


def test_no_forward_op_of_the_lecture_is_in_the_list():
    """Spelled as torch spells them (with overloads), so a miss is not a typo."""
    assert set(torch._C._dispatch_get_all_op_names()) >= LECTURE_FORWARD
    assert LECTURE_FORWARD.isdisjoint(derivative_block.derivative_ops())


# ---------------------------------------------------------------- every op refused
@pytest.mark.parametrize("mode", list(MODES))
def test_every_derivative_op_is_refused(shipped, mode):
    """Called through torch.ops with arguments built from its schema, under each grad mode
    (inference mode skips the autograd keys: the CPU refusal answers there)."""
    with MODES[mode]():
        wrong, unbuildable = unrefused(lambda name, op, args, kwargs: op(*args, **kwargs))
    assert unbuildable == []
    assert wrong == []
    assert len(derivative_block.derivative_ops()) - len(NOT_CALLABLE) > 200


def test_every_derivative_op_is_refused_by_its_decomposition(shipped):
    """op.decompose() runs the CompositeImplicitAutograd kernel: the refusal at that key, also
    for the ops whose derivative torch ships as a composite of forward ops."""
    assert {"aten::embedding_backward", "aten::_unpack_dual", "aten::silu_backward"} <= set(shipped.composite)

    def decompose(name, op, args, kwargs):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "CompositeImplicitAutograd")
        op.decompose(*args, **kwargs)

    wrong, unbuildable = unrefused(decompose, "CompositeImplicitAutograd")
    assert unbuildable == [] and wrong == []


def test_every_derivative_op_is_refused_at_every_key_it_has_a_kernel_for(shipped):
    keys = [getattr(torch._C.DispatchKey, k) for k in derivative_block.KERNEL_KEYS]
    keys += [getattr(torch._C.DispatchKey, k) for k in ("Autograd", *derivative_block.AUTOGRAD_KEYS)]

    def at_every_key(name, op, args, kwargs):
        for key in keys:
            if not torch._C._dispatch_has_kernel_for_dispatch_key(name, key.name):
                continue
            if not ours(name, key.name):
                raise AssertionError(f"not install()'s kernel at {key.name} (not called)")
            try:
                op._op_dk(key, *args, **kwargs)
            except AutogradUnavailable as e:
                if not str(e).startswith(f"{name} "):
                    raise AssertionError(f"refused at {key.name} as {e}") from None
            else:
                raise AssertionError(f"computed at {key.name}")
        op(*args, **kwargs)

    wrong, unbuildable = unrefused(at_every_key)
    assert unbuildable == [] and wrong == []


def test_every_derivative_op_is_refused_through_the_boxed_and_jit_calls(shipped):
    """torch._C's own ways to call an operator by name, without torch.ops."""
    assert hasattr(torch._C, "_dispatch_call_boxed")

    def boxed(name, op, args, kwargs):
        qualified, _, overload_name = name.partition(".")
        handle = torch._C._dispatch_find_schema_or_throw(qualified, overload_name)
        torch._C._dispatch_call_boxed(handle, *args, **kwargs)

    def jit_overload(name, op, args, kwargs):
        qualified, _, overload_name = name.partition(".")
        torch._C._get_operation_overload(qualified, overload_name)[0](*args, **kwargs)

    for route in (boxed, jit_overload):
        wrong, unbuildable = unrefused(route)
        assert unbuildable == [] and wrong == [], route.__name__


def test_a_refusal_is_noted_for_the_runner(shipped):
    before = len(derivative_block.CALLS)
    refused(torch.ops.aten.tanh_backward, torch.ones(2), torch.ones(2))
    assert derivative_block.CALLS[before:] == ["aten::tanh_backward"]


# ---------------------------------------------------------------- other routes, same refusal
def test_the_packet_and_its_overloads_are_refused(shipped):
    x, y = torch.randn(3), torch.rand(3)
    assert refused(torch.ops.aten.tanh_backward, x, y).startswith("aten::tanh_backward ")
    name = "tanh_backward"
    assert refused(getattr(torch.ops.aten, name).default, x, y).startswith("aten::tanh_backward ")
    assert refused(torch.ops.aten.tanh_backward.grad_input, x, y, grad_input=torch.empty(3)).startswith(
        "aten::tanh_backward.grad_input "
    )
    m = torch.ones(3, 4)
    nbb = torch._ops.ops.aten.native_batch_norm_backward
    message = refused(
        nbb, m, m, torch.ones(4), None, None, torch.zeros(4), torch.ones(4), True, 1e-5, [True] * 3
    )
    assert message.startswith("aten::native_batch_norm_backward ")


def test_torchs_top_level_functions_are_refused(shipped):
    g, out = torch.randn(4, 5), torch.softmax(torch.randn(4, 5), 1)
    assert refused(torch._softmax_backward_data, g, out, 1, torch.float32).startswith(
        "aten::_softmax_backward_data "
    )
    assert refused(torch._log_softmax_backward_data, g, out.log(), 1, torch.float32).startswith(
        "aten::_log_softmax_backward_data "
    )


def test_every_python_binding_of_a_derivative_op_is_refused(shipped):
    """torch.*, torch._VF, torch._C._VariableFunctions, torch._C._nn...: each binding of a
    derivative name, with the arguments of each of its overloads (out= where Python has it)."""
    by_base: dict[str, list[str]] = {}
    for name in derivative_block.derivative_ops():
        by_base.setdefault(base_name(name), []).append(name)
    bound = [(module, base) for module in BINDINGS for base in sorted(by_base) if hasattr(module, base)]
    assert (torch._C._VariableFunctions, "_softmax_backward_data") in bound and len(bound) >= 30
    wrong = []
    for module, base in bound:
        hits = 0
        for name in by_base[base]:
            if not ours(name, "CPU"):
                wrong.append(f"{name}: not install()'s kernel at CPU (not called)")
                continue
            args, kwargs = arguments(overload(name))
            outs = [kwargs.pop(a.name) for a in overload(name)._schema.arguments if a.is_out]
            if outs:
                kwargs["out"] = outs[0] if len(outs) == 1 else tuple(outs)
            where = f"{getattr(module, '__name__', type(module).__name__)}.{base} as {name}"
            try:
                getattr(module, base)(*args, **kwargs)
            except AutogradUnavailable as e:
                hits += 1
                if not str(e).startswith(f"{name} "):
                    wrong.append(f"{where}: refused as {e}")
            except TypeError as e:
                if "unexpected keyword argument 'out'" not in str(e):  # Python binds no out= form
                    wrong.append(f"{where}: {e}")
            except Exception as e:  # noqa: BLE001 - reported
                wrong.append(f"{where}: {type(e).__name__}: {e}")
            else:
                wrong.append(f"{where}: computed")
        if not hits:
            wrong.append(f"{base}: no overload refused")
    assert wrong == []


def test_torch_nn_grad_is_refused(shipped):
    grad = sys.modules["torch.nn.grad"]
    w, g = torch.ones(1, 1, 2), torch.ones(1, 1, 2)
    assert helper_refused(grad.conv1d_input, (1, 1, 3), w, g).startswith("torch.nn.grad.conv1d_input ")
    assert helper_refused(grad.conv1d_weight, torch.ones(1, 1, 3), (1, 1, 2), g).startswith(
        "torch.nn.grad.conv1d_weight "
    )


def test_vmap_of_a_derivative_op_is_refused(shipped):
    """functorch's batching rules and its Python decompositions (mse_loss_backward's, loaded on
    first use) both land on a refusal."""
    x = torch.rand(3, 4)
    helper_refused(torch.vmap(lambda a: torch.ops.aten.tanh_backward(a, a)), x)
    helper_refused(torch.vmap(lambda a: torch.ops.aten.mse_loss_backward(a, a, a, 1)), x)


# ---------------------------------------------------------------- decompositions and helpers
def test_every_decomposition_of_a_derivative_op_is_refused(shipped):
    """torch._decomp's tables (the "meta" one only allocates outputs: no values to copy)."""
    ops = set(derivative_block.derivative_ops())
    tables = {
        "decomposition_table": torch._decomp.decomposition_table,
        **{k: v for k, v in torch._decomp.global_decomposition_table.items() if k != "meta"},
    }
    wrong, tried = [], 0
    for table_name, table in tables.items():
        for op, fn in list(table.items()):
            if not (isinstance(op, torch._ops.OpOverload) and op.name() in ops):
                continue
            tried += 1
            if all(f.__code__ is shipped.codes.get(f, f.__code__) for f in _chain(fn)):
                wrong.append(f"{table_name}[{op}]: torch's code (not called: dummy arguments)")
                continue
            args, kwargs = arguments(op)
            try:
                fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - judged below
                if UNAVAILABLE not in str(e):
                    wrong.append(f"{table_name}[{op}]: {type(e).__name__}: {e}")
            else:
                wrong.append(f"{table_name}[{op}]: computed")
    assert torch.ops.aten.tanh_backward.default in torch._decomp.decomposition_table
    assert tried >= 80
    assert wrong == []


def test_every_backward_of_torch_decomp_decompositions_is_refused(shipped):
    module = sys.modules["torch._decomp.decompositions"]
    names = [n for n in dir(module) if "backward" in n and callable(getattr(module, n))]
    assert {"tanh_backward", "_softmax_backward_data", "native_batch_norm_backward"} <= set(names)
    for name in names:
        assert helper_refused(getattr(module, name))
    for name in ("get_decompositions", "core_aten_decompositions"):
        assert helper_refused(getattr(torch._decomp, name)).startswith(f"torch._decomp.{name} ")


def test_every_function_of_torch_refs_is_refused(shipped):
    """torch._refs are decompositions too (this torch names none of them *backward*: all of
    them are refused, those included)."""
    assert len(shipped.refs) > 300
    names = {f.__name__ for f in shipped.refs}
    assert {"tanh", "log_softmax", "softmax"} <= names
    wrong = []
    for fn in shipped.refs:
        try:
            fn()
        except RuntimeError as e:
            if UNAVAILABLE not in str(e):
                wrong.append(f"{fn.__module__}.{fn.__qualname__}: {e}")
        else:
            wrong.append(f"{fn.__module__}.{fn.__qualname__}: ran")
    assert wrong == []


@pytest.mark.filterwarnings("ignore:`get_numerical_jacobian` was part of:FutureWarning")
def test_gradchecks_finite_differences_are_refused(shipped):
    gradcheck = sys.modules["torch.autograd.gradcheck"]
    x = torch.rand(3, dtype=torch.float64)
    for name in ("get_numerical_jacobian", "_get_numerical_jacobian", "gradcheck", "gradgradcheck"):
        assert helper_refused(getattr(gradcheck, name), torch.tanh, (x,)).startswith(
            f"torch.autograd.gradcheck.{name} "
        )


# ---------------------------------------------------------------- honest forward work
def test_the_lectures_forward_pass_is_bit_identical(shipped):
    """Installed vs as torch ships (computed before install()), parameters requiring grad under
    enable_grad; and no refused op is reached on the way."""
    before = len(derivative_block.CALLS)
    now = _lecture_forward()
    assert derivative_block.CALLS[before:] == []
    assert now.keys() == shipped.forward.keys() and len(now) > 30
    differ = [k for k in now if not torch.equal(now[k], shipped.forward[k])]
    assert differ == []


# ---------------------------------------------------------------- no graph, no tangent
def _zero_or_refused(call, true: torch.Tensor) -> None:
    """What an autograd route yields while installed: a refusal, no graph to differentiate, or
    zeros or None (never the true value)."""
    try:
        result = call()
    except RuntimeError as e:
        assert UNAVAILABLE in str(e) or "does not require grad" in str(e), e
        return
    result = result[0] if isinstance(result, tuple) else result
    assert result is None or torch.equal(result, torch.zeros_like(true)), result
    assert not torch.allclose(true, torch.zeros_like(true))  # so zeros are not the true value


def test_no_operator_records_a_graph(shipped):
    x = torch.randn(3)
    with torch.enable_grad():
        assert torch.is_grad_enabled()
        w = torch.randn(3, requires_grad=True)
        loss = (w * x).tanh().sum()
        assert w.requires_grad and w.is_leaf
        assert loss.grad_fn is None and not loss.requires_grad
        with torch.inference_mode(False):
            assert (w * x).tanh().sum().grad_fn is None
        with pytest.raises(RuntimeError, match="does not require grad"):
            torch.autograd.grad(loss, w)
        with pytest.raises(RuntimeError, match="does not require grad"):
            loss.backward()


def _scripted(w: torch.Tensor, x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    h = torch.tanh(x @ w + b)
    return h * h + h


def test_torchscript_records_no_graph(shipped):
    """Past the profiling runs, the executor's DifferentiableGraph neither."""
    scripted = torch.jit.script(_scripted)
    w, x, b = torch.randn(3, 3, requires_grad=True), torch.randn(4, 3), torch.randn(3, requires_grad=True)
    with torch.enable_grad():
        for _ in range(4):
            out = scripted(w, x, b)
            assert out.grad_fn is None and not out.requires_grad
    assert torch.equal(out, _scripted(w, x, b))


def test_torch_func_yields_no_derivative(shipped):
    f = lambda a: (a * a).tanh().sum()  # noqa: E731
    x = torch.tensor([0.5, -1.0, 2.0])
    true = 2 * x * (1 - torch.tanh(x * x) ** 2)
    with torch.enable_grad():
        _zero_or_refused(lambda: torch.func.grad(f)(x), true)
        _zero_or_refused(lambda: torch.func.vjp(f, x)[1](torch.tensor(1.0)), true)
        _zero_or_refused(lambda: torch.func.jacrev(f)(x), true)
        _zero_or_refused(lambda: torch.autograd.functional.jacobian(f, x), true)
        _zero_or_refused(lambda: torch.func.jvp(f, (x,), (torch.ones(3),))[1], true.sum())
        _zero_or_refused(lambda: torch.func.jacfwd(f)(x), true)
        _zero_or_refused(
            lambda: torch.autograd.functional.jacobian(f, x, strategy="forward-mode", vectorize=True), true
        )


def test_forward_ad_refuses_a_dual_number(shipped):
    import torch.autograd.forward_ad as fwAD

    x = torch.ones(3)
    with torch.enable_grad(), fwAD.dual_level():
        assert refused(fwAD.make_dual, x, x).startswith("aten::_make_dual ")
        assert refused(torch._make_dual, x, x, level=0).startswith("aten::_make_dual ")
        assert refused(fwAD.unpack_dual, x).startswith("aten::_unpack_dual ")


# ---------------------------------------------------------------- holes
def test_torchs_fused_linear_cross_entropy_yields_no_gradient(shipped):
    """torch.nn.modules.linear_cross_entropy (F.linear_cross_entropy's chunked path, new in torch
    2.13) computes the gradients of linear + cross-entropy in its forward pass, in Python, from
    forward ops: with the lecture's h, W2, b2 it gives dh, dW2, db2, with an identity weight
    dlogits. Neither its file is a DERIVATIVE_CODE one nor its custom op's name
    (torch_nn::_linear_cross_entropy_batch_chunked) a DERIVATIVE one. (The custom op gives them
    too once torch._dynamo is imported; not called here: importing torch._dynamo while installed
    fails half-way, in torch._decomp.)"""
    try:
        lce = importlib.import_module("torch.nn.modules.linear_cross_entropy")
    except ImportError:
        pytest.skip("this torch has no fused linear cross-entropy")
    a = shipped.grads
    W2, b2, Yb = a.params["W2"], a.params["b2"], a.Yb
    accumulate = lce._linear_cross_entropy_batch_chunked_accumulator
    options = ("mean", -100, 0.0, 32, "accurate", torch.float32, True, True, True)
    try:
        _, dh, dW2t, db2 = accumulate(a.values["h"], W2.T.contiguous(), Yb, b2, None, *options)
        _, dlogits, _, _ = accumulate(a.values["logits"], torch.eye(27), Yb, None, None, *options)
    except RuntimeError as e:
        assert UNAVAILABLE in str(e)
        return
    copied = {
        "dh": torch.allclose(dh, a.grads["h"], rtol=1e-4, atol=1e-7),
        "dW2": torch.allclose(dW2t.T, a.grads["W2"], rtol=1e-4, atol=1e-7),
        "db2": torch.allclose(db2, a.grads["b2"], rtol=1e-4, atol=1e-7),
        "dlogits": torch.allclose(dlogits, a.grads["logits"], rtol=1e-4, atol=1e-7),
    }
    assert not any(copied.values()), (
        "linear_cross_entropy._linear_cross_entropy_batch_chunked_accumulator computed torch's own "
        f"gradients while installed (allclose to autograd's): {copied}"
    )
