"""The runbook has an entry for every alarm the module creates, and every alarm's description
links to its entry. The alarms are read from the module's own HCL (python-hcl2, which checkov
brings into the test bed), their names expanded as Terraform would with the default
`name_prefix`, so an alarm added to `infra/` without its entry fails here. (The outcomes, the
Flux outcomes and the dashboard's states are held to the runbook by the library's unit tests,
where their enums are.)"""

import re
import hcl2

from mdread import DOCS, ROOT, headings, section

INFRA = ROOT / "infra"
RUNBOOK = DOCS / "runbook.md"


def module():
    """Resources by (type, name), locals and variables of the module's *.tf."""
    out = {"resource": {}, "locals": {}, "variable": {}}
    for tf in sorted(INFRA.glob("*.tf")):
        with open(tf) as f:
            doc = hcl2.load(f)
        for block in doc.get("resource", []):
            for typ, named in block.items():
                for name, body in named.items():
                    out["resource"][(typ, name)] = body
        for block in doc.get("locals", []):
            out["locals"].update(block)
        for block in doc.get("variable", []):
            out["variable"].update(block)
    return out


def one_value(value):
    """python-hcl2 gives some attributes as one-element lists."""
    while isinstance(value, list) and len(value) == 1:
        value = value[0]
    return value


def resolve(value, mod, each=None):
    """A string of the module with its references replaced by what they name: locals,
    variables' defaults, other resources' attributes, `each.key`/`each.value...`, and
    `replace(x, "a", "b")`. What it cannot resolve stays and fails the caller's match."""
    value = one_value(value)
    if not isinstance(value, str):
        return value

    def one(expr):
        try:
            return lookup(expr.strip())
        except (KeyError, TypeError, IndexError):
            return "${" + expr + "}"

    def lookup(expr):
        m = re.fullmatch(r'replace\((.+?), "(.*?)", "(.*?)"\)', expr)
        if m:
            return str(one(m.group(1))).replace(m.group(2), m.group(3))
        parts = expr.split(".")
        if parts[0] == "each" and each is not None:
            v = {"key": each[0], "value": each[1]}[parts[1]]
            for p in parts[2:]:
                v = v[p]
            return resolve(v, mod, each)
        if parts[0] == "local":
            return resolve(mod["locals"][parts[1]], mod)
        if parts[0] == "var":
            return resolve(mod["variable"][parts[1]]["default"], mod)
        if len(parts) == 3 and (parts[0], parts[1]) in mod["resource"]:
            attr = {"function_name": "function_name", "name": "name"}[parts[2]]
            return resolve(mod["resource"][(parts[0], parts[1])][attr], mod)
        return "${" + expr + "}"

    # Innermost interpolations first (a replace() of an each.value).
    for _ in range(8):
        new = re.sub(r"\$\{([^${}]+)\}", lambda m: str(one(m.group(1))), value)
        if new == value:
            break
        value = new
    return value


def for_each(body, mod):
    """The (key, value) pairs a resource is made for: one `(None, None)` without for_each."""
    fe = one_value(body.get("for_each"))
    if fe is None:
        return [(None, None)]
    m = re.fullmatch(r"\$\{local\.([a-z_]+)\}", fe)
    assert m, f"for_each {fe!r}: only a local map is expanded here"
    value = one_value(mod["locals"][m.group(1)])
    if isinstance(value, str):  # merge([for ...]...): the outcome alarms, expanded as HCL would
        return outcome_alarms(mod)
    return list(value.items())


def outcome_alarms(mod):
    """local.outcome_alarms: every function of local.alarms times each outcome the list names."""
    text = "".join(p.read_text() for p in sorted(INFRA.glob("*.tf")))
    outcomes = re.findall(r'"([a-z_]+)"', re.search(r"for outcome in \[([^\]]*)\]", text).group(1))
    assert outcomes, "no outcome list in local.outcome_alarms"
    return [
        (f"{k}_{o}", {"kind": k, "function": a["function"], "outcome": o})
        for k, a in one_value(mod["locals"]["alarms"]).items()
        for o in outcomes
    ]


def alarms():
    """(resource, alarm name without the prefix, description) of every alarm the module makes."""
    mod = module()
    prefix = resolve(mod["variable"]["name_prefix"]["default"], mod) + "-"
    out = []
    for (typ, name), body in mod["resource"].items():
        if typ != "aws_cloudwatch_metric_alarm":
            continue
        for each in for_each(body, mod):
            each = None if each == (None, None) else each
            alarm = resolve(body["alarm_name"], mod, each)
            assert alarm.startswith(prefix) and "${" not in alarm, f"{name}: {alarm!r} not expanded"
            out.append((name, alarm[len(prefix):], resolve(body["alarm_description"], mod, each)))
    return out


def test_every_alarm_is_read_from_the_module():
    names = {a for _, a, _ in alarms()}
    # The count the module makes with its defaults: a reader that expands less fails here.
    assert {"state-sync-dlq-not-empty", "cluster-bootstrap-flux-stuck", "cluster-bootstrap-failed-final"} <= names
    assert len(names) == 17, sorted(names)


def test_every_alarm_has_a_runbook_entry():
    entries = section(RUNBOOK.read_text(), "Alarms")
    missing = [a for _, a, _ in alarms() if f"`{a}`" not in entries]
    assert not missing, f"alarms of infra/ with no entry under the runbook's Alarms: {missing}"


def test_every_alarm_description_links_to_its_entry():
    mod = module()
    url = resolve(mod["variable"]["runbook_url"]["default"], mod)
    text = RUNBOOK.read_text()
    titles = {a: t for _, t, a in headings(text)}
    for resource, alarm, description in alarms():
        m = re.search(re.escape(url) + r"#([\w-]+)", description)
        assert m, f"{resource} ({alarm}): its description does not link to {url}#...: {description}"
        assert m.group(1) in titles, f"{alarm}: #{m.group(1)} is no heading of docs/runbook.md"
        title = titles[m.group(1)]
        entry = title + "\n" + section(text, title)
        assert f"`{alarm}`" in entry, f"{alarm}: its description links to the entry {title!r}, which is another alarm's"


def test_the_runbook_url_is_this_repositorys_page():
    mod = module()
    url = resolve(mod["variable"]["runbook_url"]["default"], mod)
    repo = re.search(r'^repository = "([^"]+)"', (ROOT / "Cargo.toml").read_text(), re.M).group(1)
    assert url == f"{repo}/blob/main/docs/runbook.md", url
