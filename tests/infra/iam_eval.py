"""A small IAM policy evaluator, and a converter from the module's `aws_iam_policy_document`
blocks to IAM JSON policy documents.

`allows(documents, action, resource, context)` answers whether the documents allow one request.
It takes IAM JSON (as `aws iam get-role-policy`, `get-queue-attributes` or `get-key-policy` give it
back, or as `policy_document()` below builds it) and knows nothing of HCL. What it follows:

- Evaluation logic (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html):
  an explicit Deny in any document wins; otherwise some Allow must apply; otherwise the request is
  implicitly denied. The documents are taken as one set, which is how a request within one account
  is decided when identity and resource policies both apply. It does not model permissions
  boundaries, session policies, SCPs, or a KMS key policy's own rule that IAM policies count only
  where the key policy lets the account's root principal in: pass the documents that decide the
  request.
- Action and NotAction: `*` and `?` wildcards, case-insensitive
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_action.html).
- Resource and NotResource: `*` and `?` wildcards, case-sensitive
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_resource.html).
  A statement with neither (a trust policy's) applies to any resource.
- Principal and NotPrincipal (resource policies): matched against the context's
  `aws:PrincipalServiceName`, `aws:PrincipalArn` and `aws:PrincipalAccount`
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html). A context
  with none of them cannot say who asks: such a statement then does not Allow, and does Deny.
- Condition (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html):
  every operator of a block, and every key of an operator, must hold; several values of one key
  are alternatives (for the negated operators: the context value must match none). A key absent
  from the context makes the condition false, except for the negated operators (true: the page's
  "If the policy condition requires that the key is not matched, such as StringNotLike or
  ArnNotLike, and the right key is not present, the condition is true"), `...IfExists` (true)
  and `Null` (which tests exactly that). Set operators
  (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-single-vs-multi-valued-context-keys.html):
  `ForAllValues:` holds when every context value matches (and when the key is absent or empty),
  `ForAnyValue:` when at least one does (never when the key is absent). A list in the context
  tested by a single-valued operator is refused rather than guessed.
- Condition keys are case-insensitive; values compare case-sensitively except for the
  `...IgnoreCase` operators and `Bool`.

What it refuses rather than guesses: IAM policy variables in values (`${aws:username}`), the Date
operators, and a set operator combined with `...IfExists`. Text of the form `${some.reference}`
(no colon inside) is plain text to it: the converter below leaves the module's references that
way, so that its policies can be evaluated before anything is deployed.
"""

import functools
import ipaddress
import re

__all__ = ["allows", "policy_document", "Module"]


# --- evaluation --------------------------------------------------------------------------------


def allows(documents, action, resource, context):
    """Whether `documents` (IAM JSON policy documents) allow `action` on `resource` for a request
    whose context is `context` (condition key -> value, or list of values)."""
    ctx = {}
    for key, value in context.items():
        ctx[key.lower()] = list(value) if isinstance(value, (list, tuple, set)) else value
    allowed = False
    for doc in documents:
        for st in _as_list(doc.get("Statement", [])):
            effect = st.get("Effect")
            if effect not in ("Allow", "Deny"):
                raise ValueError(f"statement {st.get('Sid', '')!r}: Effect {effect!r}")
            if not _applies(st, action, resource, ctx, deny=effect == "Deny"):
                continue
            if effect == "Deny":
                return False
            allowed = True
    return allowed


def _applies(st, action, resource, ctx, deny):
    if "Action" in st:
        if not any(_wild(p, action, fold=True) for p in _as_list(st["Action"])):
            return False
    elif "NotAction" in st:
        if any(_wild(p, action, fold=True) for p in _as_list(st["NotAction"])):
            return False
    else:
        raise ValueError(f"statement {st.get('Sid', '')!r} has neither Action nor NotAction")
    if "Resource" in st:
        if not any(_wild(p, resource) for p in _as_list(st["Resource"])):
            return False
    elif "NotResource" in st:
        if any(_wild(p, resource) for p in _as_list(st["NotResource"])):
            return False
    principal = _principal_matches(st, ctx)
    if principal is None:
        principal = deny
    if not principal:
        return False
    for operator, block in st.get("Condition", {}).items():
        for key, values in block.items():
            if not _condition(operator, key, [str(v) if isinstance(v, bool) else v for v in _as_list(values)], ctx):
                return False
    return True


_PRINCIPAL_KEYS = ("aws:principalservicename", "aws:principalarn", "aws:principalaccount")


def _principal_matches(st, ctx):
    """True or False; None when the statement names principals and the context names none."""
    if "Principal" in st:
        return _principal_in(st["Principal"], ctx)
    if "NotPrincipal" in st:
        found = _principal_in(st["NotPrincipal"], ctx)
        return None if found is None else not found
    return True


def _principal_in(principal, ctx):
    if principal == "*":
        return True
    if not any(k in ctx for k in _PRINCIPAL_KEYS):
        return None
    for kind, identifiers in principal.items():
        for ident in _as_list(identifiers):
            if ident == "*":
                return True
            if kind == "Service":
                if str(ctx.get("aws:principalservicename", "")).lower() == ident.lower():
                    return True
            elif kind == "AWS":
                root = re.fullmatch(r"arn:[^:]+:iam::([^:]+):root", ident)
                account = root.group(1) if root else ident if re.fullmatch(r"\d{12}", ident) else None
                if account is not None:
                    if ctx.get("aws:principalaccount") == account:
                        return True
                elif ctx.get("aws:principalarn") == ident:
                    return True
            else:
                raise NotImplementedError(f"Principal type {kind!r} is not modelled")
    return False


_POLICY_VARIABLE = re.compile(r"\$\{(?:[^}]*:[^}]*|\*|\?|\$)\}")


def _condition(operator, key, values, ctx):
    for v in values:
        if isinstance(v, str) and _POLICY_VARIABLE.search(v):
            raise NotImplementedError(f"policy variable in {operator} {key}: {v!r}")
    qualifier, _, base = operator.rpartition(":")
    if_exists = base.endswith("IfExists")
    if if_exists:
        base = base[: -len("IfExists")]
    present = key.lower() in ctx
    actual = ctx.get(key.lower())
    if base == "Null":
        if qualifier or if_exists or len(values) != 1:
            raise ValueError(f"{operator} {key}: Null takes one value, alone")
        return (not present) == (str(values[0]).lower() == "true")
    if base not in _OPERATORS:
        raise NotImplementedError(f"condition operator {operator}")
    match, negated = _OPERATORS[base]

    def holds(value):
        hit = any(match(p, value) for p in values)
        return not hit if negated else hit

    if qualifier:
        if if_exists:
            raise NotImplementedError(f"{operator}: a set operator with IfExists is not modelled")
        items = _as_list(actual) if present else []
        if qualifier == "ForAllValues":
            return all(holds(v) for v in items)
        if qualifier == "ForAnyValue":
            return any(holds(v) for v in items)
        raise NotImplementedError(f"condition set operator {qualifier}")
    if not present:
        return if_exists or negated
    if isinstance(actual, list):
        raise ValueError(f"{key} has several values in the context: test it with ForAllValues: or ForAnyValue:")
    return holds(actual)


def _arn_match(pattern, value):
    """ArnEquals/ArnLike: each of the six colon-separated parts on its own, wildcards allowed."""
    p, v = pattern.split(":", 5), value.split(":", 5)
    if len(p) == 6 and len(v) == 6:
        return all(_wild(a, b) for a, b in zip(p, v))
    # Not an ARN on one side: only a symbolic reference (`${aws_x.y.arn}`) is compared whole.
    if "${" in pattern or "${" in value:
        return _wild(pattern, value)
    return False


def _number(x):
    return float(x)


def _in_network(cidr, value):
    return ipaddress.ip_address(value) in ipaddress.ip_network(cidr, strict=False)


_OPERATORS = {
    # name: (match(policy_value, context_value), negated)
    "StringEquals": (lambda p, v: p == v, False),
    "StringNotEquals": (lambda p, v: p == v, True),
    "StringEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), False),
    "StringNotEqualsIgnoreCase": (lambda p, v: p.lower() == v.lower(), True),
    "StringLike": (lambda p, v: _wild(p, v), False),
    "StringNotLike": (lambda p, v: _wild(p, v), True),
    "ArnEquals": (_arn_match, False),
    "ArnLike": (_arn_match, False),
    "ArnNotEquals": (_arn_match, True),
    "ArnNotLike": (_arn_match, True),
    "Bool": (lambda p, v: str(p).lower() == str(v).lower(), False),
    "BinaryEquals": (lambda p, v: p == v, False),
    "NumericEquals": (lambda p, v: _number(v) == _number(p), False),
    "NumericNotEquals": (lambda p, v: _number(v) == _number(p), True),
    "NumericLessThan": (lambda p, v: _number(v) < _number(p), False),
    "NumericLessThanEquals": (lambda p, v: _number(v) <= _number(p), False),
    "NumericGreaterThan": (lambda p, v: _number(v) > _number(p), False),
    "NumericGreaterThanEquals": (lambda p, v: _number(v) >= _number(p), False),
    "IpAddress": (_in_network, False),
    "NotIpAddress": (_in_network, True),
}


@functools.lru_cache(maxsize=4096)
def _wildcard(pattern, fold):
    body = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if fold else 0))


def _wild(pattern, value, fold=False):
    return _wildcard(pattern, fold).fullmatch(value) is not None


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


# --- the module's HCL, as IAM JSON ---------------------------------------------------------------
#
# python-hcl2 hands back each attribute's value wrapped in a one-element list, and each
# expression as its source text ("${concat([...], var.x ? [...] : [])}", null as None). Module
# evaluates the few HCL forms the module's policies and locals use. A reference it cannot reduce
# stays symbolic text: a resource's or data source's attribute (`${aws_sqs_queue.state_sync.arn}`),
# an optional variable (`${var.state_role_arn}`), or a local whose value depends on one
# (`${local.kms_key_arn}`). A `dynamic "statement"` whose `for_each` depends on such a variable is
# taken as present: each of them may be, in some deployment.


class Irreducible(Exception):
    """The expression depends on something known only at plan or apply time."""


class Sym:
    """A value known only by its reference: `${var.state_role_arn}`."""

    def __init__(self, path):
        self.path = path

    @property
    def text(self):
        return "${" + self.path + "}"

    def __repr__(self):
        return self.text


class PolicyJson(Sym):
    """`data.aws_iam_policy_document.<name>.json` of a module: its text as a reference, and the
    document it stands for (what `source_policy_documents` takes in)."""

    def __init__(self, module, name, path):
        super().__init__(path)
        self.module = module
        self.name = name

    def document(self):
        return self.module.policy_document(self.name)


_META_ARGUMENTS = {"source", "version", "providers", "count", "for_each", "depends_on"}


def _unwrap(raw):
    return raw[0] if isinstance(raw, list) and len(raw) == 1 else raw


class Module:
    """One module's blocks (as `test_wiring.load()` returns them) and the values its variables
    take: `variables` overrides; otherwise a variable's default, unless that is null or empty,
    which leaves the variable symbolic (an optional feature, which may be on)."""

    def __init__(self, mod, variables=None):
        self.mod = mod
        self.variables = dict(variables or {})
        self._locals = {}
        self._children = {}

    # -- values ----------------------------------------------------------------------------------

    def var(self, name):
        if name in self.variables:
            return self.variables[name]
        decl = self.mod["variable"].get(name)
        if decl is None:
            raise KeyError(f"var.{name} is not declared")
        if "default" in decl:
            default = _unwrap(decl["default"])
            if default not in (None, [], {}):
                return default
        return Sym(f"var.{name}")

    def local(self, name):
        if name not in self._locals:
            if name not in self.mod["locals"]:
                raise KeyError(f"local.{name} is not defined")
            try:
                self._locals[name] = self.value(_unwrap(self.mod["locals"][name]), {})
            except Irreducible:
                self._locals[name] = Sym(f"local.{name}")
        return self._locals[name]

    def child(self, name):
        """`module "<name>"`: the called module (a local `source`), its variables the call's
        arguments evaluated here."""
        if name not in self._children:
            from test_wiring import load
            call = self.mod["module"].get(name)
            if call is None:
                raise KeyError(f"module.{name} is not called")
            source = _unwrap(call["source"])
            if not source.startswith(("./", "../")):
                raise Irreducible(f"module.{name} comes from {source}")
            args = {k: self.value(_unwrap(v), {}) for k, v in call.items() if k not in _META_ARGUMENTS}
            self._children[name] = Module(load((self.mod["dir"] / source).resolve()), args)
        return self._children[name]

    def output(self, name):
        decl = self.mod["output"].get(name)
        if decl is None:
            raise KeyError(f"output {name} is not declared")
        return self.value(_unwrap(decl["value"]), {})

    def value(self, data, scope):
        """A python-hcl2 value (already unwrapped) evaluated: strings are HCL templates."""
        if isinstance(data, str):
            return self.template(data, scope)
        if isinstance(data, list):
            return [self.value(d, scope) for d in data]
        if isinstance(data, dict):
            return {k: self.value(v, scope) for k, v in data.items()}
        return data

    def template(self, text, scope):
        parts = _template_parts(text)
        if len(parts) == 1 and isinstance(parts[0], _Expr):
            return self.expr(parts[0].src, scope)
        out = []
        for part in parts:
            out.append(part if isinstance(part, str) else _interpolate(self.expr(part.src, scope)))
        return "".join(out)

    def expr(self, src, scope, branches=False):
        return _Eval(self, scope, branches).run(src)

    def strings(self, raw, scope):
        """An attribute (as python-hcl2 gives it) as a flat list of strings."""
        return [_interpolate(v) for v in _flatten(self.value(_unwrap(raw), scope))]

    def expand(self, text):
        """A piece of text with the module's references in `${...}`, evaluated as a template."""
        return _interpolate(self.template(text, {}))

    # -- policy documents --------------------------------------------------------------------------

    def for_each(self, raw, scope):
        """The (key, value) pairs of a `for_each`: a condition that depends on an optional
        variable takes both branches."""
        data = _unwrap(raw)
        value = self.expr(_whole_expression(data), scope, branches=True) if isinstance(data, str) else self.value(data, scope)
        if isinstance(value, Sym):
            raise Irreducible(f"for_each over {value.text}")
        if isinstance(value, dict):
            return list(value.items())
        return list(enumerate(value))

    def statement(self, block, scope):
        out = {}
        if "sid" in block:
            out["Sid"] = _interpolate(self.value(_unwrap(block["sid"]), scope))
        out["Effect"] = _interpolate(self.value(_unwrap(block["effect"]), scope)) if "effect" in block else "Allow"
        for field, name in (("actions", "Action"), ("not_actions", "NotAction"),
                            ("resources", "Resource"), ("not_resources", "NotResource")):
            if field in block:
                out[name] = self.strings(block[field], scope)
        for field, name in (("principals", "Principal"), ("not_principals", "NotPrincipal")):
            for p in block.get(field, []):
                kind = _interpolate(self.value(_unwrap(p["type"]), scope))
                ids = self.strings(p["identifiers"], scope)
                if kind == "*":
                    out[name] = "*"
                else:
                    out.setdefault(name, {}).setdefault(kind, []).extend(ids)
        for c in block.get("condition", []):
            test = _interpolate(self.value(_unwrap(c["test"]), scope))
            variable = _interpolate(self.value(_unwrap(c["variable"]), scope))
            tests = out.setdefault("Condition", {}).setdefault(test, {})
            if variable in tests:
                raise ValueError(f"two {test} conditions on {variable} in one statement")
            tests[variable] = self.strings(c["values"], scope)
        return out

    def policy_document(self, name):
        body = self.mod["data"][("aws_iam_policy_document", name)]
        # Terraform puts the source documents' statements first, and refuses a Sid twice.
        statements = []
        for source in _flatten(self.value(_unwrap(body.get("source_policy_documents", [[]])), {})):
            if not isinstance(source, PolicyJson):
                raise Irreducible(f"source_policy_documents of {name}: {source!r}")
            statements.extend(source.document()["Statement"])
        statements += [self.statement(st, {}) for st in body.get("statement", [])]
        for dyn in body.get("dynamic", []):
            block = dyn["statement"]
            iterator = _unwrap(block.get("iterator", ["statement"]))
            for key, value in self.for_each(block["for_each"], {}):
                for content in block["content"]:
                    statements.append(self.statement(content, {iterator: {"key": key, "value": value}}))
        sids = [st["Sid"] for st in statements if "Sid" in st]
        if len(sids) != len(set(sids)):
            raise ValueError(f"{name}: a Sid twice in {sids}")
        return {"Version": "2012-10-17", "Statement": statements}


def policy_document(mod, name, variables=None):
    """`data "aws_iam_policy_document" "<name>"` of a loaded module, as IAM JSON."""
    return Module(mod, variables).policy_document(name)


def _flatten(v):
    if isinstance(v, list):
        return [x for item in v for x in _flatten(item)]
    return [v]


def _interpolate(v):
    if isinstance(v, Sym):
        return v.text
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float, str)):
        return str(v)
    raise Irreducible(f"cannot put {v!r} in a string")


class _Expr:
    def __init__(self, src):
        self.src = src


def _template_parts(text):
    parts, literal, i = [], [], 0
    while i < len(text):
        if text.startswith("$${", i):
            literal.append("${")
            i += 3
        elif text.startswith("%{", i):
            raise Irreducible(f"template directive in {text!r}")
        elif text.startswith("${", i):
            end = _scan_interpolation(text, i + 2)
            if literal:
                parts.append("".join(literal))
                literal = []
            parts.append(_Expr(text[i + 2 : end - 1]))
            i = end
        else:
            literal.append(text[i])
            i += 1
    if literal or not parts:
        parts.append("".join(literal))
    return parts


def _whole_expression(text):
    parts = _template_parts(text)
    if len(parts) == 1 and isinstance(parts[0], _Expr):
        return parts[0].src
    return repr(text)


def _scan_interpolation(src, i):
    """The index just past the `}` closing an interpolation whose body starts at `i`."""
    depth = 1
    while i < len(src):
        c = src[i]
        if c in "\"'":
            i = _scan_string(src, i)
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ValueError(f"unclosed interpolation in {src!r}")


def _scan_string(src, i):
    quote, i = src[i], i + 1
    while i < len(src):
        c = src[i]
        if c == "\\":
            i += 2
        elif src.startswith("${", i):
            i = _scan_interpolation(src, i + 2)
        elif c == quote:
            return i + 1
        else:
            i += 1
    raise ValueError(f"unclosed string in {src!r}")


_TOKEN = re.compile(r"\s*(?:(?P<num>\d+(?:\.\d+)?)|(?P<id>[A-Za-z_][A-Za-z0-9_-]*)|(?P<op>==|!=|&&|\|\||>=|<=|=>|\.\.\.|[-+*/%!?:()\[\]{},.<>=])|(?P<str>[\"']))")


def _tokens(src):
    out, i = [], 0
    while i < len(src):
        if src[i:].strip() == "":
            break
        m = _TOKEN.match(src, i)
        if not m:
            raise Irreducible(f"cannot read {src[i:]!r}")
        if m.group("str"):
            start = m.start("str")
            end = _scan_string(src, start)
            out.append(("str", src[start + 1 : end - 1]))
            i = end
            continue
        kind = "num" if m.group("num") else "id" if m.group("id") else "op"
        out.append((kind, m.group(kind)))
        i = m.end()
    out.append(("end", None))
    return out


_CONSTANTS = {"None": None, "null": None, "true": True, "True": True, "false": False, "False": False}


class _Eval:
    """Recursive descent over the tokens of one expression, evaluating as it goes."""

    def __init__(self, module, scope, branches):
        self.m, self.scope, self.branches = module, scope, branches

    def run(self, src):
        self.toks, self.i = _tokens(src), 0
        v = self.conditional(self.branches)
        if self.peek() != ("end", None):
            raise Irreducible(f"cannot read {src!r} past {self.peek()}")
        return v

    def peek(self):
        return self.toks[self.i]

    def take(self, value=None):
        tok = self.toks[self.i]
        if value is not None and tok[1] != value:
            raise Irreducible(f"expected {value!r}, found {tok}")
        self.i += 1
        return tok

    def skip_expression(self, stop):
        """Past one expression (a branch not taken) without evaluating it: up to a token of
        `stop` outside brackets and outside any conditional it contains."""
        depth, pending = 0, 0
        while True:
            kind, v = self.peek()
            if kind == "end":
                return
            if kind == "op" and v in ("(", "[", "{"):
                depth += 1
            elif kind == "op" and v in (")", "]", "}"):
                if depth == 0:
                    return
                depth -= 1
            elif depth == 0 and kind == "op" and v == "?" and "?" not in stop:
                pending += 1
            elif depth == 0 and kind == "op" and v == ":" and pending:
                pending -= 1
            elif depth == 0 and kind == "op" and v in stop:
                return
            self.i += 1

    def conditional(self, branches=False):
        start = self.i
        try:
            cond = self.logical()
            known = True
        except Irreducible:
            if not branches:
                raise
            self.i = start
            self.skip_expression({"?"})
            known = False
        if self.peek() != ("op", "?"):
            if not known:
                raise Irreducible("unknown value")
            return cond
        self.take("?")
        if known:
            if not isinstance(cond, bool):
                raise Irreducible(f"condition {cond!r} is not a bool")
            if cond:
                a = self.conditional()
                self.take(":")
                self.skip_expression({","})
                return a
            self.skip_expression({":"})
            self.take(":")
            return self.conditional()
        a = self.conditional()
        self.take(":")
        b = self.conditional()
        if not (isinstance(a, list) and isinstance(b, list)):
            raise Irreducible("both branches of an unknown condition must be lists")
        return a + b

    def logical(self):
        v = self.comparison()
        while self.peek()[1] in ("||", "&&"):
            op = self.take()[1]
            w = self.comparison()
            for x in (v, w):
                if not isinstance(x, bool):
                    raise Irreducible(f"{x!r} {op} ...")
            v = (v or w) if op == "||" else (v and w)
        return v

    def comparison(self):
        v = self.unary()
        if self.peek()[1] in ("==", "!=", ">", "<", ">=", "<="):
            op = self.take()[1]
            w = self.unary()
            if isinstance(v, Sym) or isinstance(w, Sym):
                raise Irreducible(f"{v!r} {op} {w!r}")
            v = {"==": v == w, "!=": v != w}.get(op) if op in ("==", "!=") else {
                ">": v > w, "<": v < w, ">=": v >= w, "<=": v <= w}[op]
        return v

    def unary(self):
        if self.peek() == ("op", "!"):
            self.take()
            v = self.unary()
            if not isinstance(v, bool):
                raise Irreducible(f"!{v!r}")
            return not v
        return self.postfix()

    def postfix(self):
        kind, tok = self.peek()
        if kind == "id" and tok not in _CONSTANTS and self.toks[self.i + 1] != ("op", "("):
            return self.reference()
        v = self.primary()
        while self.peek() == ("op", "["):
            self.take()
            idx = self.conditional()
            self.take("]")
            v = _index(v, idx)
        return v

    def primary(self):
        kind, tok = self.take()
        if kind == "num":
            return float(tok) if "." in tok else int(tok)
        if kind == "str":
            return self.m.template(bytes(tok, "utf-8").decode("unicode_escape") if "\\" in tok else tok, self.scope)
        if kind == "id" and tok in _CONSTANTS:
            return _CONSTANTS[tok]
        if kind == "id":
            return self.call(tok)
        if tok == "(":
            v = self.conditional()
            self.take(")")
            return v
        if tok == "[":
            if self.peek() == ("id", "for"):
                raise Irreducible("for expression")
            items = []
            while self.peek() != ("op", "]"):
                items.append(self.conditional())
                if self.peek() == ("op", ","):
                    self.take()
            self.take("]")
            return items
        if tok == "{":
            raise Irreducible("object expression")
        raise Irreducible(f"unexpected {tok!r}")

    def call(self, name):
        self.take("(")
        args = []
        while self.peek() != ("op", ")"):
            if name == "can":
                start = self.i
                try:
                    args.append(self.conditional())
                except _HclError:
                    self.i = start
                    self.skip_expression({")"})
                    args.append(_FAILED)
            else:
                args.append(self.conditional())
            if self.peek() == ("op", ","):
                self.take()
        self.take(")")
        if name not in _FUNCTIONS:
            raise Irreducible(f"function {name}()")
        if any(isinstance(a, Sym) for a in _flatten(args)) or any(
            isinstance(a, dict) and any(isinstance(x, Sym) for x in a.values()) for a in args
        ):
            raise Irreducible(f"{name}() of a value known only at apply time")
        return _FUNCTIONS[name](*args)

    def reference(self):
        root = self.take()[1]
        path = [root]
        while True:
            if self.peek() == ("op", "."):
                self.take()
                path.append(self.take()[1])
            elif self.peek() == ("op", "["):
                self.take()
                idx = self.conditional()
                self.take("]")
                path.append(idx)
            else:
                break
        if root == "var":
            return _walk(self.m.var(path[1]), path[2:])
        if root == "local":
            return _walk(self.m.local(path[1]), path[2:])
        if root in self.scope:
            return _walk(self.scope[root], path[1:])
        if root == "module":
            return _walk(self.m.child(path[1]).output(path[2]), path[3:])
        if (root == "data" and len(path) == 4 and path[1] == "aws_iam_policy_document" and path[3] == "json"
                and ("aws_iam_policy_document", path[2]) in self.m.mod["data"]):
            return PolicyJson(self.m, path[2], ".".join(path))
        if root in ("each", "count", "self", "path", "terraform"):
            raise Irreducible(f"{root}.* outside its block")
        text = root
        for part in path[1:]:
            if isinstance(part, str):
                text += f".{part}"
            elif isinstance(part, int):
                text += f"[{part}]"
            else:
                raise Irreducible(f"index {part!r} of {root}")
        return Sym(text)


def _walk(value, path):
    for part in path:
        value = _index(value, part)
    return value


def _index(value, part):
    if isinstance(value, Sym):
        if isinstance(part, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            return Sym(f"{value.path}.{part}")
        if isinstance(part, int):
            return Sym(f"{value.path}[{part}]")
        raise Irreducible(f"{value.text}[{part!r}]")
    if isinstance(value, dict):
        return value[part]
    if isinstance(value, list) and isinstance(part, int):
        return value[part]
    raise Irreducible(f"{value!r}[{part!r}]")


class _HclError(Exception):
    """What HCL itself reports as an error (caught by `can()`)."""


_FAILED = object()


def _regex(pattern, s):
    m = re.search(pattern, s)
    if not m:
        raise _HclError(f"regex {pattern!r} does not match {s!r}")
    return m.group(0)


def _replace(s, old, new):
    if len(old) > 1 and old.startswith("/") and old.endswith("/"):
        return re.sub(old[1:-1], new, s)
    return s.replace(old, new)


def _distinct(items):
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


_FUNCTIONS = {
    "concat": lambda *lists: [x for item in lists for x in item],
    "distinct": _distinct,
    "values": lambda d: [d[k] for k in sorted(d)],
    "keys": lambda d: sorted(d),
    "length": len,
    "replace": _replace,
    "regex": _regex,
    "can": lambda v: v is not _FAILED,
    "endswith": lambda s, suffix: s.endswith(suffix),
    "startswith": lambda s, prefix: s.startswith(prefix),
    "strcontains": lambda s, sub: sub in s,
    "contains": lambda items, x: x in items,
    "tostring": lambda v: _interpolate(v),
    "lower": str.lower,
    "upper": str.upper,
    "flatten": _flatten,
    "merge": lambda *ds: {k: v for d in ds for k, v in d.items()},
}
