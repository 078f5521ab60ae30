"""No person's text reaches a string NiceGUI or Quasar parses: the code is walked, and every call that parses
its string argument must be handed a literal.

`.props()` splits its string into attributes (a quote in a title closes one and opens `onmouseover=` or a
`:`-prop NiceGUI evaluates as JavaScript); `.classes()` and `.style()` split theirs into classes and CSS
declarations. Their arguments must be literals, a literal-only conditional, or a name bound only to those;
a value goes in as data instead (`element.props["aria-label"] = text`). `ui.markdown`, `ui.html` and
`set_content` take HTML or Markdown: a literal, or people's text through `to_safe_markdown`. A tooltip or a
slot template is never built by f-string, `+`, `%` or `.format()`.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PARSERS = {"props", "classes", "style"}  # NiceGUI parses the string: only literals
PARSER_KEYWORDS = {"add", "remove", "replace"}
MARKUP = {"markdown", "html"}  # ui.markdown / ui.html: HTML or Markdown rendered as such
MARKUP_METHODS = {"set_content"}
BUILT_TEXT = {"tooltip", "add_slot"}  # no string assembled from values
ESCAPERS = {"to_safe_markdown"}


def find_problems(source: str, filename: str = "<snippet>") -> list[str]:
    """Each call in `source` that hands NiceGUI a parsed string it did not get as a literal, as `file:line: why`."""
    tree = ast.parse(source, filename)
    module_names = _bindings(tree.body)
    problems: list[str] = []

    def visit(node: ast.AST, local_names: dict[str, list[ast.expr | None]]) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            local_names = _function_bindings(node)
        if isinstance(node, ast.Call):
            why = _why(node, lambda name: _static_name(name, local_names, module_names))
            if why:
                problems.append(f"{filename}:{node.lineno}: {why}")
        for child in ast.iter_child_nodes(node):
            visit(child, local_names)

    visit(tree, {})
    return problems


def _why(call: ast.Call, static_name) -> str | None:
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    name = func.attr
    if name in PARSERS:
        arguments = [*call.args, *(k.value for k in call.keywords if k.arg in PARSER_KEYWORDS)]
        for argument in arguments:
            if not _static(argument, static_name):
                return f".{name}() is handed {ast.unparse(argument)!r}: only literals; set a value as data"
    elif (name in MARKUP and _is_ui(func.value)) or name in MARKUP_METHODS:
        for argument in call.args[:1]:
            if not (_static(argument, static_name) or _escaped(argument)):
                return f"{name}() renders {ast.unparse(argument)!r} as markup: a literal or to_safe_markdown(...)"
    elif name in BUILT_TEXT:
        for argument in [*call.args, *(k.value for k in call.keywords)]:
            if _built(argument):
                return f".{name}() is handed a string built from values: {ast.unparse(argument)!r}"
    return None


def _static(node: ast.expr, static_name) -> bool:
    """A literal string (or None), a conditional whose branches are static, or a name bound only to those."""
    match node:
        case ast.Constant(value=str() | None):
            return True
        case ast.JoinedStr(values=values):  # an f-string without a value in it is a literal
            return all(isinstance(value, ast.Constant) for value in values)
        case ast.IfExp(body=body, orelse=orelse):
            return _static(body, static_name) and _static(orelse, static_name)
        case ast.Name(id=name):
            return static_name(name)
    return False


def _static_name(name: str, local_names: dict, module_names: dict) -> bool:
    scope = local_names if name in local_names else module_names
    values = scope.get(name)
    never = lambda _: False  # noqa: E731 -- a name bound to another name is not followed
    return bool(values) and all(value is not None and _static(value, never) for value in values)


def _escaped(node: ast.expr) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ESCAPERS


def _built(node: ast.expr) -> bool:
    """An f-string with values, a `+` or `%`, or a `.format()` call."""
    for part in ast.walk(node):
        if isinstance(part, ast.JoinedStr) and any(isinstance(v, ast.FormattedValue) for v in part.values):
            return True
        if isinstance(part, ast.BinOp) and isinstance(part.op, ast.Add | ast.Mod):
            return True
        if isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute) and part.func.attr == "format":
            return True
    return False


def _is_ui(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "ui"


def _bindings(body: list[ast.stmt]) -> dict[str, list[ast.expr | None]]:
    """Each name a block binds, with the values it may take (None: bound some other way, never static).

    Followed: `name = value`, `a, b = x, y`, and `for a, b in (literal tuples)` (a starred name in them bound
    by the first two); anything else binds a name to an unknown value.
    """
    names: dict[str, list[ast.expr | None]] = {}
    known: set[int] = set()  # targets whose values are recorded
    nodes = [node for statement in body for node in ast.walk(statement)]
    for node in nodes:
        match node:
            case ast.Assign(targets=[target], value=value) | ast.AnnAssign(target=target, value=ast.expr() as value):
                for name, part in _unpack(target, value):
                    names.setdefault(name.id, []).append(part)
                    known.add(id(name))
    for node in nodes:
        match node:
            case ast.For(target=target, iter=ast.Tuple(elts=items) | ast.List(elts=items)):
                for item in _expand(items, names):
                    for name, part in _unpack(target, item):
                        names.setdefault(name.id, []).append(part)
                        known.add(id(name))
    for node in nodes:
        match node:
            case ast.Name(id=name, ctx=ast.Store()) if id(node) not in known:
                names.setdefault(name, []).append(None)
            case ast.FunctionDef(name=name) | ast.AsyncFunctionDef(name=name) | ast.ClassDef(name=name):
                names.setdefault(name, []).append(None)
            case ast.alias(name=name, asname=asname):
                names.setdefault(asname or name.split(".")[0], []).append(None)
    return names


def _unpack(target: ast.expr, value: ast.expr | None) -> list[tuple[ast.Name, ast.expr | None]]:
    """The names `target` binds, each with its part of `value` (None where it cannot be told)."""
    match target:
        case ast.Name():
            return [(target, value)]
        case ast.Tuple(elts=targets) | ast.List(elts=targets):
            parts = value.elts if isinstance(value, ast.Tuple | ast.List) else []
            fits = len(parts) == len(targets) and not any(isinstance(p, ast.Starred) for p in parts)
            return [
                pair for index, each in enumerate(targets) for pair in _unpack(each, parts[index] if fits else None)
            ]
    return []


def _expand(items: list[ast.expr], names: dict[str, list[ast.expr | None]]) -> list[ast.expr | None]:
    """The items of a literal sequence, a `*name` replaced by the items of the literal sequence it is bound to."""
    expanded: list[ast.expr | None] = []
    for item in items:
        if not isinstance(item, ast.Starred):
            expanded.append(item)
        elif isinstance(item.value, ast.Name) and len(bound := names.get(item.value.id, [])) == 1:
            sequence = bound[0]
            inner = sequence.elts if isinstance(sequence, ast.Tuple | ast.List) else [None]
            expanded += [None if isinstance(each, ast.Starred) else each for each in inner]
        else:
            expanded.append(None)
    return expanded


def _function_bindings(function: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> dict:
    names = _bindings(function.body if isinstance(function.body, list) else [ast.Expr(function.body)])
    arguments = function.args
    for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]:
        if argument is not None:
            names.setdefault(argument.arg, []).append(None)
    return names


def _nicegui_sources() -> list[Path]:
    candidates = [
        ROOT / "main.py",
        *sorted((ROOT / "pages").rglob("*.py")),
        *sorted((ROOT / "components").rglob("*.py")),
    ]
    candidates += sorted((ROOT / "desk").rglob("*.py"))
    return [path for path in candidates if "nicegui" in path.read_text(encoding="utf-8")]


def test_the_walk_covers_every_page_and_component():
    walked = {path.relative_to(ROOT).as_posix() for path in _nicegui_sources()}
    assert {"main.py", "pages/admin_agents.py", "components/frame.py", "components/safe_markdown.py"} <= walked
    assert len([path for path in walked if path.startswith("pages/")]) >= 10


def test_no_call_hands_nicegui_a_string_built_from_values():
    problems = []
    for path in _nicegui_sources():
        problems += find_problems(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(
    "snippet",
    [
        # the Retry button that let a requester's title add `onmouseover=` to an admin's page
        "retry.props(f'outline dense aria-label=\"Retry triage of {order.title}\"').mark('retry')",
        "button.props('outline aria-label=\"' + order.title + '\"')",
        "button.props('aria-label=\"%s\"' % order.title)",
        "button.props('aria-label=\"{}\"'.format(order.title))",
        "button.props(add=label)",
        "button.props(remove=f'{name}')",
        "label.classes(replace='text-5xl ' + ('a' if on else 'b'))",
        "label.classes(f'{base} wrap-anywhere')",
        "label.style(f'color: {person.colour}')",
        "label.style(replace=colour)",
        "def f(kind):\n    ui.label().classes(kind)",
        "for width in widths:\n    ui.label().classes(width)",
        "width = 'w-64'\nwidth = person.name\nui.label().classes(width)",
        "PAIR, HALF = 'w-full', person.name\nui.card().classes(HALF)",
        "for heading, width in ((name, person.colour),):\n    ui.label(heading).classes(width)",
        "for heading, width in (*columns, ('AI', 'w-28')):\n    ui.label(heading).classes(width)",
        "button.tooltip(f'Retry triage of {order.title}')",
        "button.tooltip('Retry ' + order.title)",
        "button.tooltip(verb + title)",
        "ui.markdown(comment.text)",
        "ui.markdown(f'**{order.title}**')",
        "ui.html(person.name)",
        "answer.set_content(text)",
        "table.add_slot('body-cell', f'<q-td>{order.title}</q-td>')",
    ],
)
def test_the_walk_flags_strings_built_from_values(snippet):
    (problem,) = find_problems(snippet)
    assert problem.startswith("<snippet>:")


@pytest.mark.parametrize(
    "snippet",
    [
        "button.props('outline dense').mark('retry')",
        "button.props['aria-label'] = f'Retry triage of {order.title}'",
        "button.props(f'color=positive')",  # an f-string without a value is a literal
        "label.classes(replace='text-5xl text-green-8' if on else 'text-5xl text-red-8')",
        "PAIR = 'w-full gap-4'\ndef page():\n    ui.row().classes(PAIR)",
        "def f():\n    width = 'w-64' if wide else 'w-32'\n    ui.label().classes(width)",
        "PAIR, HALF = 'w-full gap-4', 'w-full md:w-1/2'\nui.card().classes(HALF)",
        "columns = (('Name', 'w-40'), ('Email', 'w-56'))\nfor heading, width in (*columns, ('AI', 'w-28')):\n"
        "    ui.label(heading).classes(width)",
        "button.tooltip(when(token.last_used_at))",
        "button.tooltip(words)",
        "ui.markdown(to_safe_markdown(text))",
        "ui.markdown('**Plain**')",
        "answer.set_content(to_safe_markdown(text))",
    ],
)
def test_the_walk_lets_literals_and_data_through(snippet):
    assert find_problems(snippet) == []
