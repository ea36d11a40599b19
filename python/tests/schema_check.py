"""A small JSON Schema validator for the subset the brim schemas use (jsonschema is not a
dependency): $ref (local "#/..."), oneOf, anyOf, type (name or list), const, enum, required,
properties, additionalProperties (bool or schema), items, minimum, maximum, minLength.
Any other keyword in a schema is an error, so the subset cannot be exceeded silently."""

import json
import os

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCHEMAS = os.path.join(ROOT, "docs", "schemas")

_ANNOTATIONS = {"$schema", "$id", "$defs", "title", "description", "examples", "default", "$comment"}
_KEYWORDS = {"$ref", "oneOf", "anyOf", "type", "const", "enum", "required", "properties",
             "additionalProperties", "items", "minimum", "maximum", "minLength"}


def load(name):
    with open(os.path.join(SCHEMAS, name)) as f:
        return json.load(f)


def _type_ok(value, name):
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    raise ValueError("unsupported type %r" % name)


def _equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _resolve(root, ref):
    if not ref.startswith("#/"):
        raise ValueError("only local $ref supported: %r" % ref)
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def errors(instance, schema, root=None, path="$"):
    """All validation errors as 'path: message' strings (empty when valid)."""
    root = schema if root is None else root
    unknown = set(schema) - _KEYWORDS - _ANNOTATIONS
    if unknown:
        raise ValueError("schema keyword(s) outside the supported subset at %s: %s" % (path, sorted(unknown)))
    out = []
    if "$ref" in schema:
        out += errors(instance, _resolve(root, schema["$ref"]), root, path)
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not errors(instance, s, root, path)]
        if len(matches) != 1:
            detail = ""
            if not matches:
                # the closest branch: fewest errors
                best = min((errors(instance, s, root, path) for s in schema["oneOf"]), key=len)
                detail = " (closest: %s)" % "; ".join(best[:3])
            out.append("%s: matches %d of oneOf, expected exactly 1%s" % (path, len(matches), detail))
    if "anyOf" in schema:
        if not any(not errors(instance, s, root, path) for s in schema["anyOf"]):
            out.append("%s: matches none of anyOf" % path)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_type_ok(instance, n) for n in names):
            out.append("%s: %r is not of type %s" % (path, instance, "/".join(names)))
            return out
    if "const" in schema and not _equal(instance, schema["const"]):
        out.append("%s: %r != const %r" % (path, instance, schema["const"]))
    if "enum" in schema and not any(_equal(instance, e) for e in schema["enum"]):
        out.append("%s: %r not in %r" % (path, instance, schema["enum"]))
    is_num = isinstance(instance, (int, float)) and not isinstance(instance, bool)
    if "minimum" in schema and is_num and instance < schema["minimum"]:
        out.append("%s: %r < minimum %r" % (path, instance, schema["minimum"]))
    if "maximum" in schema and is_num and instance > schema["maximum"]:
        out.append("%s: %r > maximum %r" % (path, instance, schema["maximum"]))
    if "minLength" in schema and isinstance(instance, str) and len(instance) < schema["minLength"]:
        out.append("%s: string shorter than %d" % (path, schema["minLength"]))
    if isinstance(instance, dict):
        for key in schema.get("required", []):
            if key not in instance:
                out.append("%s: missing required %r" % (path, key))
        props = schema.get("properties", {})
        for key, value in instance.items():
            if key in props:
                out += errors(value, props[key], root, "%s.%s" % (path, key))
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    out.append("%s: unexpected property %r" % (path, key))
                elif isinstance(extra, dict):
                    out += errors(value, extra, root, "%s.%s" % (path, key))
    if isinstance(instance, list) and "items" in schema:
        for i, value in enumerate(instance):
            out += errors(value, schema["items"], root, "%s[%d]" % (path, i))
    return out


def check(instance, schema):
    errs = errors(instance, schema)
    assert not errs, "schema violations:\n  " + "\n  ".join(errs) + "\nin " + json.dumps(instance)[:2000]
