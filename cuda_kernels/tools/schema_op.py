"""The code of an op that `python -m cuda_kernels.new NAME --schema "(...) -> ..."` generates from its schema: the
blocks new.py inserts above its markers, and the files it adds (templates/schema_*.tmpl, filled in here).

Until its author writes the math the op computes a placeholder that needs no knowledge of what the inputs mean:
each output is a contiguous copy of the first Tensor input (Schema.first), on the CPU and on CUDA, with the true
gradient of that (grad to the first Tensor input, None to every other input). Its inputs are checked alike on both
devices (csrc/checks.h) and in its fake kernel: every tensor float32/float64/float16/bfloat16, with the first's
dtype and device.

The kernels (csrc/cpu/NAME.cpp, csrc/cuda/NAME.cu) take contiguous data: the host functions make each tensor input
contiguous and pass its data pointer (nullptr for an optional input not given), the plain numbers (float, int,
bool) as they are, and the outputs' pointers; one loop step per element of the first input (a grid-stride loop on
CUDA). Optional numbers, strings and lists stay on the host, where the kernels' comments name them. (square's
elementwise_cuda takes one input and its strided layout: an op of several inputs does not fit it.)
"""

from __future__ import annotations

import json
import re
import string
from dataclasses import dataclass
from pathlib import Path

from cuda_kernels.tools.codegen_format import (
    COLUMN_LIMIT,
    cpp_list,
    fit_comments,
    py_call,
    py_lambda,
    py_return,
    py_tuple,
    wrap_comment,
)
from cuda_kernels.tools.op_schema import Arg, Schema

TEMPLATES = Path(__file__).resolve().parent / "templates"
# The files an op adds, relative to the root, as format strings of the name, and their templates.
NEW_FILES = {
    "csrc/cuda/{name}.cu": "schema_cuda.cu.tmpl",
    "csrc/cuda/{name}.h": "schema_cuda.h.tmpl",
    "csrc/cpu/{name}.cpp": "schema_cpu.cpp.tmpl",
    "tests/ops/test_{name}.py": "schema_test.py.tmpl",
}


def py_literal(value: object) -> str:
    """value as Python source that ruff format leaves as it is: strings in double quotes, lists in brackets."""
    if isinstance(value, str):
        return json.dumps(value)  # double quotes; its escapes are Python's too
    if isinstance(value, list | tuple):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return repr(value)  # bool, None, int, float (a schema's float default is finite: torch refuses inf and nan)


def py_default(value: object) -> str:
    """A default of a def's parameter: a list as a tuple (a list default is shared between calls, which ruff's B006
    refuses; torch takes either for int[] and float[])."""
    if isinstance(value, list):
        items = [py_literal(v) for v in value]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
    return py_literal(value)


def render(template: str, fields: dict[str, str]) -> str:
    """string.Template substitution: a stray $ in a template raises instead of passing through."""
    return string.Template(template).substitute(fields)


@dataclass
class SchemaOp:
    """The generated code of op `name` with `schema`."""

    name: str
    schema: Schema

    # ------------------------------------------------------------------------------------------------------------
    # What the pieces share

    @property
    def first(self) -> str:
        return self.schema.first.name

    @property
    def placeholder(self) -> str:
        """What the op computes until its author edits it, in words."""
        k = self.schema.n_outputs
        return f"a contiguous copy of {self.first}" if k == 1 else f"each of its {k} outputs a copy of {self.first}"

    @property
    def ret_cpp(self) -> str:
        k = self.schema.n_outputs
        return "Tensor" if k == 1 else "std::tuple<" + ", ".join(["Tensor"] * k) + ">"

    @property
    def ret_py(self) -> str:
        k = self.schema.n_outputs
        return "Tensor" if k == 1 else "tuple[" + ", ".join(["Tensor"] * k) + "]"

    @property
    def cpp_params(self) -> list[str]:
        return [f"{a.code.cpp} {a.name}" for a in self.schema.args]

    def returned(self) -> str:
        """The host functions' return expression."""
        outs = self.schema.outputs
        return outs[0] if len(outs) == 1 else f"std::make_tuple({', '.join(outs)})"

    def kernel_params(self, restrict: bool) -> list[str]:
        """The kernels' parameters: tensor inputs as pointers and plain numbers, in schema order, then the outputs."""
        qual = " __restrict__" if restrict else ""
        params = [
            f"const scalar_t*{qual} {a.name}" if a.is_tensor else f"{a.code.kernel} {a.name}"
            for a in self.schema.kernel_args
        ]
        return params + [f"scalar_t*{qual} {out}" for out in self.schema.outputs]

    def kernel_call_args(self) -> list[str]:
        """What the host functions hand the kernels for kernel_params: contiguous data, numbers, outputs."""
        args = []
        for a in self.schema.kernel_args:
            if a.type == "Tensor":
                args.append(f"{a.name}_c.const_data_ptr<scalar_t>()")
            elif a.type == "Tensor?":
                args.append(f"data_or_null<scalar_t>({a.name}_c)")
            else:
                args.append(a.name)
        return args + [f"{out}.mutable_data_ptr<scalar_t>()" for out in self.schema.outputs]

    def host_prologue(self, indent: str) -> list[str]:
        """The host functions' input check and outputs, and the early return of an empty input."""
        first = self.first
        lines = [cpp_list(f"check_{self.name}_inputs(", [a.name for a in self.schema.tensors], ");", indent, True)]
        lines += [f"{indent}Tensor {out} = new_output({first}, {first}.sizes());" for out in self.schema.outputs]
        lines.append(f"{indent}if ({first}.numel() == 0) return {self.returned()};")
        return lines

    def contiguous_inputs(self, indent: str) -> list[str]:
        """Contiguous copies of the tensor inputs (the input itself where it already is contiguous)."""
        lines = []
        for a in self.schema.tensors:
            if a.type == "Tensor":
                lines.append(f"{indent}const Tensor {a.name}_c = torch::stable::contiguous({a.name});")
            else:
                lines.append(f"{indent}const std::optional<Tensor> {a.name}_c = contiguous_or_none({a.name});")
        return lines

    def kernel_comment(self, device: str) -> str:
        s = self.schema
        tensors = [a.name for a in s.kernel_args if a.is_tensor]
        numbers = [a.name for a in s.kernel_args if not a.is_tensor]
        text = (
            f"The op on elements i of contiguous data ({device}): the tensor inputs' data ({', '.join(tensors)}; "
            "nullptr for an optional one not given)"
            + (f", the numbers ({', '.join(numbers)})" if numbers else "")
            + f" and the outputs ({', '.join(s.outputs)}), float16/bfloat16 computed in float (opmath_t)."
        )
        if s.host_only_args:
            names = ", ".join(a.name for a in s.host_only_args)
            text += f" Not passed, being no plain number: {names} (pass what the math needs from them)."
        text += f" TODO({self.name}): the math; the placeholder copies {self.first}."
        return wrap_comment(text, "// ")

    def fields(self) -> dict[str, str]:
        """The ${...} fields of the file templates."""
        s, name, first = self.schema, self.name, self.first
        loop_body = "\n".join(
            f"    {out}[i] = static_cast<scalar_t>(static_cast<opmath_t>({first}[i]));" for out in s.outputs
        )
        launch_params = [*self.kernel_params(False), "int64_t numel", "cudaStream_t stream"]
        cpu_call = cpp_list(
            f"{name}_kernel<scalar_t>(", [*self.kernel_call_args(), "begin", "end"], ");", " " * 6, True
        )
        kernel_launch = cpp_list(
            "kernel<<<grid, kThreads, 0, stream>>>(",
            [a.name for a in s.kernel_args] + s.outputs + ["numel"],
            ");",
            "  ",
            call=True,
        )
        launch_comment = wrap_comment(
            f"Runs {name}_kernel (csrc/cuda/{name}.cu) over the numel >= 1 elements of contiguous data on `stream`: "
            "the "
            "tensor inputs' data (nullptr for an optional one not given), the plain numbers and the outputs, as "
            "the kernel takes them. Raises std::runtime_error when the launch fails. Instantiated for float, "
            "double, c10::Half and c10::BFloat16.",
            "// ",
        )
        return {
            "name": name,
            "first": first,
            "outputs": " and ".join(s.outputs) if len(s.outputs) <= 2 else ", ".join(s.outputs),
            "placeholder": self.placeholder,
            "loop_body": loop_body,
            "cpu_kernel_def": cpp_list(
                f"void {name}_kernel(", [*self.kernel_params(False), "int64_t begin", "int64_t end"], ") {"
            ),
            "cpu_def": cpp_list(f"{self.ret_cpp} {name}_cpu(", self.cpp_params, ") {"),
            "check_call": cpp_list(f"check_{name}_inputs(", [a.name for a in s.tensors], ");", "  ", True),
            "new_outputs": "\n".join(f"  Tensor {out} = new_output({first}, {first}.sizes());" for out in s.outputs),
            "returned": self.returned(),
            "contiguous_inputs": "\n".join(self.contiguous_inputs("  ")),
            "cpu_kernel_call": cpu_call,
            "cuda_kernel_def": cpp_list(
                f"__global__ void {name}_kernel(", [*self.kernel_params(True), "int64_t numel"], ") {"
            ),
            "launch_comment": launch_comment,
            "launch_def": cpp_list("void launch(", launch_params, ") {"),
            "launch_decl": cpp_list("void launch(", launch_params, ");"),
            "kernel_launch": kernel_launch,
        }

    def new_files(self) -> dict[str, str]:
        """{path relative to the root: contents} of the files the op adds."""
        fields = self.fields()
        out = {}
        for pattern, template in NEW_FILES.items():
            text = (TEMPLATES / template).read_text()
            if template == "schema_test.py.tmpl":
                text = render(text, {**fields, **self.test_fields()})
            else:
                device = "CUDA" if template.startswith("schema_cuda") else "CPU"
                text = fit_comments(render(text, {**fields, "kernel_comment": self.kernel_comment(device)}))
            # Optional blocks (the tests a schema may not need) leave blank lines at the end: one newline, as ruff's.
            out[pattern.format(name=self.name)] = text.rstrip("\n") + "\n"
        return out

    # ------------------------------------------------------------------------------------------------------------
    # C++ insertions

    def ops_h_declarations(self) -> str:
        name = self.name
        comment = (
            f"{name}: generated from its schema (csrc/api.cpp) by `python -m cuda_kernels.new`. CPU: "
            f"csrc/cpu/{name}.cpp. CUDA: csrc/cuda/ops.cpp, kernels in csrc/cuda/{name}.cu."
        )
        return (
            f"{wrap_comment(comment, '// ')}\n"
            f"{cpp_list(f'{self.ret_cpp} {name}_cpu(', self.cpp_params, ');')}\n"
            f"{cpp_list(f'{self.ret_cpp} {name}_cuda(', self.cpp_params, ');')}\n\n"
        )

    def checks_h_input(self) -> str:
        name, first, s = self.name, self.first, self.schema
        comment = wrap_comment(
            f"cuda_kernels.{name}'s inputs, checked alike on both devices: each tensor (an optional one when given) "
            f"float32/float64/float16/bfloat16, with {first}'s dtype and device. TODO({name}): the shapes the op "
            "takes, here and in its fake kernel (cuda_kernels/ops.py), so that torch.compile reports the same errors.",
            "// ",
        )
        lines = [
            comment,
            cpp_list(f"inline void check_{name}_inputs(", [f"{a.code.cpp} {a.name}" for a in s.tensors], ") {"),
            f'  constexpr const char* op = "cuda_kernels.{name}";',
            f'  check_float_input(op, "{first}", {first});',
        ]
        for a in s.checked_tensors[1:]:
            args = ["op", f'"{first}"', first, f'"{a.name}"', a.name]
            lines.append(cpp_list("check_float_like(", args, ");", "  ", True))
        size = ["op", f"{first}.sizes()", f"static_cast<int64_t>({first}.element_size())"]
        lines.append(cpp_list("check_output_fits(", size, ");", "  ", True))
        return "\n".join(lines) + "\n}\n\n"

    def api_schema(self) -> str:
        """The m.def line. A schema too long for one line is split into adjacent string literals at argument
        boundaries, one a line, which clang-format leaves as they are (it would split the literal itself, anywhere)."""
        text = f"{self.name}{self.schema.text}".replace("\\", "\\\\").replace('"', '\\"')
        line = f'  m.def("{text}");'
        if len(line) <= COLUMN_LIMIT:
            return line + "\n"
        indent = " " * 6
        pieces, current = [], ""
        for piece in re.split(r"(?<=, )", text):  # each piece keeps its ", "
            if current and len(f'{indent}"{current}{piece}");') > COLUMN_LIMIT:
                pieces.append(current)
                current = piece
            else:
                current += piece
        pieces.append(current)
        return "  m.def(\n" + "\n".join(f'{indent}"{p}"' for p in pieces) + ");\n"

    def cuda_host_function(self) -> str:
        name, first = self.name, self.first
        launch_args = [*self.kernel_call_args(), f"{first}.numel()", "stream"]
        comment = wrap_comment(
            f"{name}'s CUDA function (generated from its schema): the input check, the outputs, then the kernel on "
            f"contiguous inputs (csrc/cuda/{name}.cu). TODO({name}): the outputs' shapes; the placeholder's are "
            f"{first}'s.",
            "// ",
        )
        lines = [
            comment,
            cpp_list(f"{self.ret_cpp} {name}_cuda(", self.cpp_params, ") {"),
            cpp_list(f"check_{name}_inputs(", [a.name for a in self.schema.tensors], ");", "  ", True),
            f"  const int device = {first}.get_device_index();",
            "  const torch::stable::accelerator::DeviceGuard guard(device);",
            *self.host_prologue("  ")[1:],
            *self.contiguous_inputs("  "),
            "  const cudaStream_t stream = current_stream(device);",
            f"  cpu::dispatch_float({first}.scalar_type(), [&](auto t) {{",
            "    using scalar_t = decltype(t);",
            cpp_list(f"{name}_launch::launch<scalar_t>(", launch_args, ");", "    ", True),
            "  });",
            f"  return {self.returned()};",
            "}",
        ]
        return "\n".join(lines) + "\n\n"

    # ------------------------------------------------------------------------------------------------------------
    # Python

    def py_params(self, defaults: bool = True, annotate: bool = True) -> list[str]:
        """The wrapper's parameters in schema order, '*' before the keyword-only ones."""
        params, star = [], False
        for a in self.schema.args:
            if a.kwarg_only and not star:
                params.append("*")
                star = True
            text = f"{a.name}: {a.code.py}" if annotate else a.name
            if defaults and a.default_text is not None:
                text += f" = {py_default(a.default)}" if annotate else f"={py_default(a.default)}"
            params.append(text)
        return params

    def call_args(self) -> list[str]:
        """The arguments of a call of the op, named as the wrapper's parameters: keyword-only ones by name."""
        return [f"{a.name}={a.name}" if a.kwarg_only else a.name for a in self.schema.args]

    def ops_py_block(self) -> str:
        """The op's block in cuda_kernels/ops.py: wrapper, fake kernel, autograd formula."""
        name, upper, first, s = self.name, self.name.upper(), self.first, self.schema
        params = self.py_params()
        docs = [f"        {first}: shape TODO; float32, float64, float16 or bfloat16, on the CPU or CUDA, any strides."]
        for a in s.args:
            if a.name != first:
                given = " (or None)" if a.optional else ""
                docs.append(
                    f"        {a.name}: shape TODO; {first}'s dtype and device{given}."
                    if a.is_tensor
                    else f"        {a.name}: TODO."
                )
        dump_args = ["_DUMP_DIR", f'"{name}"', f"_{upper}.op", *self.call_args()]
        fake_checks = ["op", *[f"{a.name}={a.name}" for a in s.checked_tensors]]
        empty = f"{first}.new_empty({first}.shape)"
        fake_return = f"    return {empty}" if s.n_outputs == 1 else py_call("    return (", [empty] * s.n_outputs, ")")
        # One gradient per positional input (torch's contract for register_autograd; keyword-only arguments, which
        # cannot be tensors there, get none): the placeholder's outputs are copies of `first`, so grad flows to it
        # alone.
        positional = [a for a in s.args if not a.kwarg_only]
        grad_types = ["Tensor" if a.name == first else "Tensor | None" if a.is_tensor else "None" for a in positional]
        backward_ret = grad_types[0] if len(grad_types) == 1 else f"tuple[{', '.join(grad_types)}]"
        if s.n_outputs == 1:
            grad_params, grad_sum = ["ctx", "grad: Tensor"], []
        else:
            grad_params = ["ctx", *[f"grad{i}: Tensor" for i in range(s.n_outputs)]]
            total = " + ".join(f"grad{i}" for i in range(s.n_outputs))
            grad_sum = [f"    grad = {total}  # each output is a copy of {first}"]
        grads = ["grad" if a.name == first else "None" for a in positional]
        if any(a.kwarg_only for a in s.args):
            setup_params = "ctx, inputs, keyword_only_inputs, output"
            setup_doc = (
                "inputs: the positional arguments; keyword_only_inputs: {name: value} of the others. TODO("
                f"{name}): save what the derivative uses, e.g. x, w = inputs; ctx.save_for_backward(x, w); ctx.eps = "
                'keyword_only_inputs["eps"]. The placeholder\'s gradient needs nothing.'
            )
            grad_doc = "One gradient per positional input (keyword-only arguments get none)"
        else:
            setup_params = "ctx, inputs, output"
            setup_doc = (
                f"Saves what the backward needs; the placeholder's gradient needs nothing. TODO({name}): save the "
                "inputs the derivative uses, e.g. x, w, eps = inputs; ctx.save_for_backward(x, w); ctx.eps = eps."
            )
            grad_doc = "One gradient per input"
        grad_doc += (
            ", in the schema's order (None for a number, or for a tensor it does not flow to), in torch ops so that "
            f"double backward works. TODO({name}): the derivatives of the op; the placeholder (a copy of {first}) "
            f"passes grad on to {first}."
        )
        lines = [
            "# " + "-" * 105,
            f"# {name} (python -m cuda_kernels.new --schema)",
            "",
            "",
            py_call(f"def {name}(", params, f") -> {self.ret_py}:"),
            f'    """TODO({name}): what the op computes.',
            "",
            f"    The placeholder until its kernels are written: {self.placeholder}.",
            "",
            "    Args:",
            *docs,
            "    Returns:",
            f"        Shape TODO (the placeholder's: {first}'s); {first}'s dtype and device, contiguous.",
            '    """',
            "    if _DUMP_DIR is None:",
            py_call(f"        return _{upper}(", [a.name for a in s.args], ")"),
            py_call("    return _dump.call_and_dump(", dump_args, ")"),
            "",
            "",
            f'@torch.library.register_fake("cuda_kernels::{name}")',
            py_call(f"def _{name}_fake(", params, f") -> {self.ret_py}:"),
            f"    # The kernels' input checks (csrc/checks.h). TODO({name}): the op's shape checks and outputs.",
            f'    op = "cuda_kernels.{name}"',
            py_call("    _check_float_inputs(", fake_checks, ")"),
            f"    _check_output_fits(op, tuple({first}.shape), {first}.dtype)",
            fake_return,
            "",
            "",
            f"def _{name}_setup_context({setup_params}) -> None:",
            wrap_comment(setup_doc, "    # "),
            "    pass",
            "",
            "",
            py_call(f"def _{name}_backward(", grad_params, f") -> {backward_ret}:"),
            wrap_comment(grad_doc, "    # "),
            *grad_sum,
            py_return(grads, "    "),
            "",
            "",
            f"_{upper} = _Op(",
            f'    "{name}",',
            f"    _{name}_backward,",
            f"    _{name}_setup_context,",
            ")",
            "",
            "",
            "",
        ]
        return "\n".join(lines)

    def bench_entry(self) -> str:
        """The op's entry in cuda_kernels/tools/bench/table.py: its tensor inputs of one shape, the other arguments
        at their test values, timed against the placeholder's math in torch."""
        name, s = self.name, self.schema
        tensors = [a.name for a in s.tensors]
        if len(f"        reference=lambda {', '.join(tensors)}: (") > COLUMN_LIMIT:
            tensors = [f"t{i}" for i in range(len(tensors))]  # the lambdas' parameters: the names where they fit
        param = dict(zip([a.name for a in s.tensors], tensors, strict=True))
        call = []
        for a in s.args:
            value = param[a.name] if a.is_tensor else self.test_value(a)
            call.append(f"{a.name}={value}" if a.kwarg_only else value)
        lines = ["    multi_input(", f'        "{name}",']
        lines.append(py_lambda("        ours=", tensors, f"cuda_kernels.{name}(", call, ")", ","))
        first = param[self.first]
        ref = f"{first}.clone()" if s.n_outputs == 1 else "(" + ", ".join([f"{first}.clone()"] * s.n_outputs) + ")"
        lines.append(
            py_lambda("        reference=", tensors, ref, None, "", f",  # TODO({name}): the same math as the kernels")
        )
        if s.n_outputs > 1:
            lines.append(f"        outputs={s.n_outputs},")
        lines.append("    ),")
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------------------------------------------------------
    # The test file

    def test_value(self, a: Arg) -> str:
        """The value a non-tensor argument gets in the generated test and benchmark entry: its default, else a value
        of its type."""
        if a.default_text is not None:
            return py_literal(a.default)
        sample = a.code.sample
        if isinstance(sample, list) and a.size:
            sample = sample * a.size
        return py_literal(sample)

    def test_fields(self) -> dict[str, str]:
        s, first, name = self.schema, self.first, self.name
        seeds = {a.name: i for i, a in enumerate(s.tensors)}

        def value(a: Arg) -> str:
            if not a.is_tensor:
                return self.test_value(a)
            made = f"rand(*SHAPE, dtype=dtype, device=device, seed={seeds[a.name]})"
            return f"{made} if with_optional else None" if a.optional else made

        positional = [a for a in s.args if not a.kwarg_only]
        keyword = [a for a in s.args if a.kwarg_only]
        body = []
        if positional:
            body += ["    args = ("] + [f"        {value(a)},  # {a.name}" for a in positional] + ["    )"]
        else:
            body.append("    args = ()")
        if keyword:
            body += ["    kwargs = {"] + [f'        "{a.name}": {value(a)},' for a in keyword] + ["    }"]
        else:
            body.append("    kwargs: dict = {}")
        body.append("    return args, kwargs")
        names = tuple(a.name for a in positional)
        imports = ["DEVICES", "DTYPES", "rand"] + (["requires_cuda"] if len(s.tensors) > 1 else [])
        if s.n_outputs == 1:
            outs = "(out,), (reference(*args, **kwargs),)"
            ref_body = f"    return {first}.clone()"
        else:
            outs = "out, reference(*args, **kwargs)"
            ref_body = "    return " + ", ".join([f"{first}.clone()"] * s.n_outputs)
        optional_test = ""
        if any(a.optional for a in s.tensors):
            optional_test = f"""

@pytest.mark.parametrize("device", DEVICES)
def test_optional_tensors_absent(device):
    args, kwargs = make_args(torch.float32, device, with_optional=False)
    check(cuda_kernels.{name}(*args, **kwargs), args, kwargs)
"""
        mismatch = ""
        if len(s.tensors) > 1:
            second = s.checked_tensors[1].name
            mismatch = f"""

@pytest.mark.parametrize("device", [*DEVICES, "meta"])
def test_mismatched_dtypes(device):
    args, kwargs = make_args(torch.float32, device)
    bad = torch.ones(SHAPE, dtype=torch.float64, device=device)
    args, kwargs = replaced(args, kwargs, "{second}", bad)
    match = f"{{OP}}: {first} and {second} must have the same dtype"
    with pytest.raises(RuntimeError, match=match):
        cuda_kernels.{name}(*args, **kwargs)


@requires_cuda
@pytest.mark.gpu
def test_mismatched_devices():
    args, kwargs = replaced(*make_args(torch.float32, "cuda"), "{second}", torch.ones(SHAPE))
    match = f"{{OP}}: {first} and {second} must be on the same device"
    with pytest.raises(RuntimeError, match=match):
        cuda_kernels.{name}(*args, **kwargs)
"""
        return {
            "conftest_imports": ", ".join(imports),
            "positional": py_tuple("POSITIONAL = ", [json.dumps(n) for n in names]),
            "make_args_body": "\n".join(body),
            "reference_def": py_call("def reference(", self.py_params(defaults=False, annotate=False), "):"),
            "reference_body": ref_body,
            "outs_and_expected": outs,
            "n_outputs": str(s.n_outputs),
            "optional_test": optional_test,
            "mismatch_tests": mismatch,
        }
