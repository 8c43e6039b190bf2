#!/usr/bin/env python3
"""kpgen: writes Runnel's Kafka message codecs from Kafka's JSON definitions.

Usage: kpgen.py SCHEMA_DIR OUT_DIR

SCHEMA_DIR holds messages/ (requests, responses, headers, data) and records/
(internal-topic key/value schemas). OUT_DIR receives:

  kp_msg.h          structs, prototypes, the API table declaration
  kp_msg_<api>.c    decode/encode/size/defaults for one API's request and response
  kp_msg_data.c     the same for headers and "data" schemas
  kp_msg_table.c    the API table (keys, version ranges, generic entry points)
  kp_msg_fill.h/.c  test-only fillers that set every field present in a version

Generated code only sequences calls into kp_types.c, which holds all byte-level
logic. The generator uses the standard library only, fails on any key or type
it does not know, writes only the APIs protocol/gen/apis.txt lists (those
Runnel serves or sends), and copies no descriptive text from the definitions. Output is deterministic.
"""

import json
import os
import re
import sys

PRIMITIVES = {
    # type: (C type, read fn, write fn, fixed size or None)
    "bool": ("bool", "kp_read_bool(r)", "kp_write_bool", 1),
    "int8": ("int8_t", "kp_read_i8(r)", "kp_write_i8", 1),
    "int16": ("int16_t", "kp_read_i16(r)", "kp_write_i16", 2),
    "uint16": ("uint16_t", "kp_read_u16(r)", "kp_write_u16", 2),
    "int32": ("int32_t", "kp_read_i32(r)", "kp_write_i32", 4),
    "uint32": ("uint32_t", "kp_read_u32(r)", "kp_write_u32", 4),
    "int64": ("int64_t", "kp_read_i64(r)", "kp_write_i64", 8),
    "float64": ("double", "kp_read_f64(r)", "kp_write_f64", 8),
    "uuid": ("kp_uuid", "kp_read_uuid(r)", None, 16),
    "string": ("kp_str", None, None, None),
    "bytes": ("kp_slice", None, None, None),
    "records": ("kp_records", None, None, None),
}

# Versions Kafka 4 removed that Runnel still serves to old clients: Produce
# v0-2, which Kafka 4.4 still advertises (KAFKA-18659) and whose fields its
# definitions still describe ("versions": "0+"; v1 and v2 are v0's layout).
KEPT_OLD_MIN = {0: 0}

TOP_KEYS = {"apiKey", "type", "listeners", "name", "validVersions", "flexibleVersions",
            "deprecatedVersions", "latestVersionUnstable", "fields", "commonStructs"}
FIELD_KEYS = {"name", "type", "versions", "about", "fields", "default", "entityType",
              "ignorable", "nullableVersions", "mapKey", "taggedVersions", "tag",
              "zeroCopy", "flexibleVersions"}
MSG_TYPES = {"request", "response", "header", "data"}
# Kafka 4.4's coordinator records name their record type in apiKey; Runnel
# treats them as data schemas, writing the record type itself.
RECORD_TYPES = {"coordinator-key", "coordinator-value"}
C_KEYWORDS = {"default", "int", "char", "short", "long", "float", "double", "signed",
              "unsigned", "struct", "union", "enum", "const", "static", "register",
              "return", "if", "else", "for", "while", "do", "switch", "case", "break",
              "continue", "goto", "void", "volatile", "auto", "extern", "sizeof",
              "typedef", "inline", "restrict", "bool", "true", "false"}


def fail(msg):
    sys.stderr.write("kpgen: " + msg + "\n")
    sys.exit(1)


def strip_comments(text):
    """Removes // comments outside string literals."""
    out, i, n, in_str = [], 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def snake(name):
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    s = s.lower()
    return s + "_" if s in C_KEYWORDS else s


class Versions:
    """An inclusive version range; hi None means open-ended; empty if lo None."""

    def __init__(self, spec):
        spec = str(spec).strip()
        if spec == "none":
            self.lo, self.hi = None, None
        elif spec.endswith("+"):
            self.lo, self.hi = int(spec[:-1]), None
        elif "-" in spec:
            a, b = spec.split("-")
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(spec)

    def empty(self):
        return self.lo is None

    def contains(self, v):
        return not self.empty() and v >= self.lo and (self.hi is None or v <= self.hi)

    def cond(self, valid):
        """C condition on v for this range, simplified within the valid range."""
        if self.empty() or self.lo > valid.hi or (self.hi is not None and self.hi < valid.lo):
            return "0"
        parts = []
        if self.lo > valid.lo:
            parts.append("v >= %d" % self.lo)
        if self.hi is not None and self.hi < valid.hi:
            parts.append("v <= %d" % self.hi)
        return " && ".join(parts) if parts else "1"

    def intersect(self, other):
        if self.empty() or other.empty():
            return Versions("none")
        lo = max(self.lo, other.lo)
        his = [h for h in (self.hi, other.hi) if h is not None]
        hi = min(his) if his else None
        r = Versions("none")
        if hi is None or lo <= hi:
            r.lo, r.hi = lo, hi
        return r


def and_cond(*conds):
    conds = [c for c in conds if c != "1"]
    if "0" in conds:
        return "0"
    if not conds:
        return "1"
    return " && ".join("(%s)" % c if "&&" in c and len(conds) > 1 else c for c in conds)


class Field:
    def __init__(self, msg, raw, struct_prefix):
        for k in raw:
            if k not in FIELD_KEYS:
                fail("%s: unknown field key %r" % (msg.name, k))
        self.name = raw["name"]
        self.cname = snake(self.name)
        self.type = raw["type"]
        versions = raw.get("versions", raw.get("taggedVersions"))
        if versions is None:
            fail("%s.%s: no versions" % (msg.name, self.name))
        self.versions = Versions(versions)
        self.nullable = Versions(raw.get("nullableVersions", "none"))
        self.default = raw.get("default")
        if isinstance(self.default, bool):
            self.default = "true" if self.default else "false"
        elif isinstance(self.default, (int, float)):
            self.default = str(self.default)
        self.tag = raw.get("tag")
        if isinstance(self.tag, str):  # BrokerHeartbeat writes "tag": "0"
            if not self.tag.isdigit():
                fail("%s.%s: tag %r is not a number" % (msg.name, self.name, self.tag))
            self.tag = int(self.tag)
        self.tagged = Versions(raw.get("taggedVersions", "none"))
        if (self.tag is None) != self.tagged.empty():
            fail("%s.%s: tag and taggedVersions go together" % (msg.name, self.name))
        self.flex_override = Versions(raw["flexibleVersions"]) if "flexibleVersions" in raw else None
        self.is_array = self.type.startswith("[]")
        self.elem = self.type[2:] if self.is_array else self.type
        self.struct = None
        if self.elem not in PRIMITIVES:
            if not self.elem[:1].isupper():
                fail("%s.%s: unknown type %r" % (msg.name, self.name, self.type))
            if "fields" in raw:
                self.struct = msg.add_struct(self.elem, raw["fields"], self.versions)
            else:
                self.struct = msg.common_ref(self.elem)
        elif "fields" in raw:
            fail("%s.%s: primitive with fields" % (msg.name, self.name))
        if self.elem == "records" and self.is_array:
            fail("%s.%s: array of records" % (msg.name, self.name))


class Struct:
    def __init__(self, msg, name, cname):
        self.msg = msg
        self.name = name
        self.cname = cname
        self.fields = []
        self.used_in_array = False
        self.used_tagged = False


class Message:
    def __init__(self, path):
        with open(path) as fh:
            raw = json.loads(strip_comments(fh.read()))
        for k in raw:
            if k not in TOP_KEYS:
                fail("%s: unknown top-level key %r" % (path, k))
        self.path = path
        self.raw = raw
        self.name = raw["name"]
        self.kind = "data" if raw["type"] in RECORD_TYPES else raw["type"]
        if self.kind not in MSG_TYPES:
            fail("%s: unknown type %r" % (path, self.kind))
        self.api_key = raw.get("apiKey") if self.kind in ("request", "response") else None
        self.listeners = raw.get("listeners", [])
        self.valid = Versions(raw["validVersions"])
        if self.api_key in KEPT_OLD_MIN and self.kind in ("request", "response"):
            self.valid.lo = min(self.valid.lo, KEPT_OLD_MIN[self.api_key])
        if self.valid.empty():  # an API Kafka removed (LeaderAndIsr and the like)
            return
        self.flexible = Versions(raw["flexibleVersions"])
        self.deprecated = Versions(raw.get("deprecatedVersions", "none"))
        self.unstable_top = bool(raw.get("latestVersionUnstable", False))
        base = self.name
        for suffix, short in (("Request", "req"), ("Response", "resp")):
            if self.kind in ("request", "response") and base.endswith(suffix):
                base = base[: -len(suffix)]
                self.api_snake = snake(base).rstrip("_")
                self.cname = "kp_%s_%s" % (self.api_snake, short)
                break
        else:
            self.api_snake = snake(base).rstrip("_")
            self.cname = "kp_" + self.api_snake
        self.structs = []  # children first, root last
        self.by_name = {}
        self.common_raw = {c["name"]: c for c in raw.get("commonStructs", [])}
        self.root = Struct(self, self.name, self.cname)
        self.root.fields = [Field(self, f, self.cname) for f in raw["fields"]]
        self.structs.append(self.root)

    def add_struct(self, name, fields_raw, versions):
        if name in self.by_name:
            fail("%s: struct %s defined twice" % (self.name, name))
        s = Struct(self, name, "%s_%s" % (self.cname, snake(name).rstrip("_")))
        self.by_name[name] = s
        s.fields = [Field(self, f, s.cname) for f in fields_raw]
        self.structs.append(s)
        return s

    def common_ref(self, name):
        if name in self.by_name:
            return self.by_name[name]
        if name not in self.common_raw:
            fail("%s: unknown struct type %r" % (self.name, name))
        cs = self.common_raw[name]
        return self.add_struct(name, cs["fields"], Versions(cs.get("versions", "0+")))


# ---------------------------------------------------------------- emitting --

class Emitter:
    def __init__(self, msg):
        self.msg = msg
        self.valid = Versions("%d-%d" % (msg.valid.lo, msg.valid.hi))
        self.out = []

    def line(self, text="", depth=0):
        self.out.append(("    " * depth + text) if text else "")

    def flex(self, f=None):
        if f is not None and f.flex_override is not None:
            return self.flex_expr(f.flex_override)
        return self.flex_expr(self.msg.flexible)

    def flex_expr(self, vs):
        c = vs.cond(self.valid)
        return {"1": "true", "0": "false"}.get(c, "(%s)" % c)

    def present(self, f):
        """Condition for f encoded positionally (not in the tagged section)."""
        tagged = f.tagged.intersect(f.versions).cond(self.valid)
        if tagged == "0":
            return f.versions.cond(self.valid)
        if tagged == "1":
            return "0"
        return and_cond(f.versions.cond(self.valid), "!(%s)" % tagged)

    def nullable(self, f):
        c = f.nullable.cond(self.valid)
        return {"1": "true", "0": "false"}.get(c, "(%s)" % c)

    # -- C types --
    def member_type(self, f):
        if f.struct is not None:
            if f.is_array:
                return "struct { int32_t n; %s *v; }" % f.struct.cname
            return "%s *" % f.struct.cname if not f.nullable.empty() else f.struct.cname
        ctype = PRIMITIVES[f.elem][0]
        if f.is_array:
            return "struct { int32_t n; %s *v; }" % ctype
        return ctype

    def emit_typedefs(self):
        for s in self.msg.structs:
            self.line("typedef struct %s %s;" % (s.cname, s.cname))
        for s in self.msg.structs:
            self.line("struct %s {" % s.cname)
            if not s.fields:
                self.line("char unused_;", 1)
            for f in s.fields:
                t = self.member_type(f)
                sep = "" if t.endswith("*") else " "
                self.line("%s%s%s;" % (t, sep, f.cname), 1)
            self.line("};")
            self.line()

    # -- defaults --
    def default_expr(self, f):
        d = f.default
        if f.is_array:
            return "-1" if d == "null" else None
        if f.struct is not None:
            return None
        t = f.elem
        if d is None:
            return None
        if t == "bool":
            if d not in ("true", "false"):
                fail("%s.%s: bad bool default" % (self.msg.name, f.name))
            return d
        if t in ("int8", "int16", "uint16", "int32", "uint32", "int64"):
            v = int(d, 0)
            if v == 0:
                return None
            if t == "int64" and (v > 2**31 - 1 or v < -(2**31)):
                return "INT64_C(%d)" % v
            if t == "int32" and v == -(2**31):
                return "INT32_MIN"
            return str(v)
        if t == "float64":
            return None if float(d) == 0 else repr(float(d))
        if t in ("string", "bytes", "records"):
            if d == "null":
                return {"string": "KP_STR_NULL", "bytes": "(kp_slice){NULL, -1}",
                        "records": "(kp_records){NULL, -1, NULL}"}[t]
            if d == "":
                return None
            if t != "string":
                fail("%s.%s: non-empty bytes default" % (self.msg.name, f.name))
            return 'KP_STR_LIT("%s")' % d.replace("\\", "\\\\").replace('"', '\\"')
        if t == "uuid":
            return None
        fail("%s.%s: default for %s" % (self.msg.name, f.name, t))

    def emit_defaults(self, s):
        self.line("void %s_defaults(%s *p)" % (s.cname, s.cname))
        self.line("{")
        self.line("memset(p, 0, sizeof(*p));", 1)
        for f in s.fields:
            d = self.default_expr(f)
            if f.is_array and d is not None:
                self.line("p->%s.n = %s;" % (f.cname, d), 1)
            elif f.struct is not None and not f.is_array and f.nullable.empty():
                self.line("%s_defaults(&p->%s);" % (f.struct.cname, f.cname), 1)
            elif d is not None:
                self.line("p->%s = %s;" % (f.cname, d), 1)
        self.line("}")
        self.line()

    # -- sizes --
    def min_size_terms(self, f, flex):
        if f.is_array or f.elem in ("bytes", "records"):
            return "(%s ? 1u : 4u)" % flex
        if f.elem == "string":
            return "(%s ? 1u : 2u)" % flex
        if f.struct is not None:
            if not f.nullable.empty():
                return "1u"
            return "%s_min_size(v)" % f.struct.cname
        return "%du" % PRIMITIVES[f.elem][3]

    def emit_min_size(self, s):
        self.line("static size_t %s_min_size(int16_t v)" % s.cname)
        self.line("{")
        self.line("size_t n = 0;", 1)
        self.line("(void)v;", 1)
        for f in s.fields:
            cond = self.present(f)
            if cond == "0":
                continue
            term = self.min_size_terms(f, self.flex(f))
            stmt = "n += %s;" % term
            self.guarded(cond, [stmt], 1)
        fl = self.flex()
        if fl != "false":
            self.guarded(fl if fl != "true" else "1", ["n += 1;"], 1)
        self.line("return n;", 1)
        self.line("}")
        self.line()

    def guarded(self, cond, stmts, depth):
        if cond == "1":
            for st in stmts:
                self.line(st, depth)
            return
        self.line("if (%s) {" % cond, depth)
        for st in stmts:
            self.line(st, depth + 1)
        self.line("}", depth)

    # -- decode --
    def read_value(self, f, target, flex, rd):
        """Statements reading one (non-array) value of f's element type into target."""
        t = f.elem
        if f.struct is not None:
            return ["%s_read(%s, a, &%s, v);" % (f.struct.cname, rd, target)]
        if t == "string":
            return ["%s = kp_read_str(%s, %s);" % (target, rd, flex)]
        if t == "bytes":
            return ["%s = kp_read_bytes(%s, %s);" % (target, rd, flex)]
        if t == "records":
            return ["%s = kp_read_records(%s, %s);" % (target, rd, flex)]
        return ["%s = %s;" % (target, PRIMITIVES[t][1].replace("(r)", "(%s)" % rd))]

    def null_check(self, f, null_test, rd):
        nl = self.nullable(f)
        if nl == "true":
            return []
        cond = null_test if nl == "false" else "%s && !%s" % (null_test, nl)
        return ["if (%s)" % cond, "    kp_reader_fail(%s, KP_ERR__MALFORMED);" % rd]

    def read_field(self, f, flex, rd="r"):
        tgt = "p->%s" % f.cname
        if f.is_array:
            if f.struct is not None:
                elem_min = "%s_min_size(v)" % f.struct.cname
            elif f.elem == "string":
                elem_min = "(%s ? 1u : 2u)" % flex
            elif f.elem == "bytes":
                elem_min = "(%s ? 1u : 4u)" % flex
            else:
                elem_min = "%du" % PRIMITIVES[f.elem][3]
            body = ["%s.n = kp_read_array_len(%s, %s, %s);" % (tgt, rd, flex, elem_min)]
            body += self.null_check(f, "%s.n < 0" % tgt, rd)
            body += ["if (%s.n > 0) {" % tgt,
                     "    %s.v = kp_arena_calloc(a, (size_t)%s.n, sizeof(*%s.v));" % (tgt, tgt, tgt),
                     "    if (%s.v == NULL)" % tgt,
                     "        kp_reader_fail(%s, KP_ERR__NOMEM);" % rd,
                     "    for (int32_t i = 0; i < %s.n && %s->err == KP_ERR_NONE; i++) {" % (tgt, rd)]
            for st in self.read_value(f, "%s.v[i]" % tgt, flex, rd):
                body.append("        " + st)
            body += ["    }", "}"]
            return ["{"] + ["    " + b for b in body] + ["}"]
        if f.struct is not None and not f.nullable.empty():
            nl = self.nullable(f)
            return ["if (%s && kp_read_i8(%s) < 0) {" % (nl, rd),
                    "    %s = NULL;" % tgt,
                    "} else {",
                    "    %s = kp_arena_alloc(a, sizeof(*%s));" % (tgt, tgt),
                    "    if (%s == NULL)" % tgt,
                    "        kp_reader_fail(%s, KP_ERR__NOMEM);" % rd,
                    "    else",
                    "        %s_read(%s, a, %s, v);" % (f.struct.cname, rd, tgt),
                    "}"]
        stmts = self.read_value(f, tgt, flex, rd)
        if f.elem in ("string", "bytes", "records"):
            stmts += self.null_check(f, "%s.len < 0" % tgt, rd)
        return stmts

    def tagged_fields(self, s):
        out = []
        for f in s.fields:
            tv = f.tagged.intersect(f.versions)
            if not tv.empty() and tv.cond(self.valid) != "0":
                out.append((f, tv))
        out.sort(key=lambda x: x[0].tag)
        return out

    def emit_read(self, s):
        self.line("static void %s_read(kp_reader *r, kp_arena *a, %s *p, int16_t v)" % (s.cname, s.cname))
        self.line("{")
        self.line("(void)a;", 1)
        self.line("(void)v;", 1)
        self.line("%s_defaults(p);" % s.cname, 1)
        for f in s.fields:
            cond = self.present(f)
            if cond == "0":
                continue
            self.guarded(cond, self.read_field(f, self.flex(f)), 1)
        fl = self.flex()
        tagged = self.tagged_fields(s)
        if fl != "false":
            if not tagged:
                self.guarded(fl if fl != "true" else "1", ["kp_skip_tags(r);"], 1)
            else:
                self.line("if (%s) {" % fl if fl != "true" else "{", 1)
                self.line("uint32_t ntags = kp_read_tag_count(r);", 2)
                self.line("for (uint32_t t = 0; t < ntags && r->err == KP_ERR_NONE; t++) {", 2)
                self.line("kp_reader sub;", 3)
                self.line("uint32_t tag = kp_read_tag(r, &sub);", 3)
                self.line("switch (tag) {", 3)
                for f, tv in tagged:
                    self.line("case %d:" % f.tag, 3)
                    self.guarded(tv.cond(self.valid), self.read_field(f, "true", "(&sub)"), 4)
                    self.line("break;", 4)
                self.line("default:", 3)
                self.line("break;", 4)
                self.line("}", 3)
                self.line("if (sub.err != KP_ERR_NONE)", 3)
                self.line("kp_reader_fail(r, sub.err);", 4)
                self.line("}", 2)
                self.line("}", 1)
        self.line("}")
        self.line()

    # -- encode --
    def write_value(self, f, src, flex, w, elem_struct=False):
        t = f.elem
        if f.struct is not None:
            ref = src if (not f.nullable.empty() and not elem_struct) else "&" + src
            return ["%s_write(%s, %s, v);" % (f.struct.cname, w, ref)]
        if t == "string":
            return ["kp_write_str(%s, %s, %s);" % (w, flex, src)]
        if t == "bytes":
            return ["kp_write_bytes(%s, %s, %s);" % (w, flex, src)]
        if t == "records":
            return ["kp_write_records(%s, %s, &%s);" % (w, flex, src)]
        if t == "uuid":
            return ["kp_write_uuid(%s, &%s);" % (w, src)]
        return ["%s(%s, %s);" % (PRIMITIVES[t][2], w, src)]

    def write_field(self, f, flex, w="w"):
        src = "p->%s" % f.cname
        if f.is_array:
            body = ["kp_write_array_len(%s, %s, %s.n);" % (w, flex, src),
                    "for (int32_t i = 0; i < %s.n; i++) {" % src]
            body += ["    " + st for st in self.write_value(f, "%s.v[i]" % src, flex, w, True)]
            body.append("}")
            return body
        if f.struct is not None and not f.nullable.empty():
            nl = self.nullable(f)
            zero = "%s_zero" % f.struct.cname
            return ["if (%s && %s == NULL) {" % (nl, src),
                    "    kp_write_i8(%s, -1);" % w,
                    "} else {",
                    "    static const %s %s;" % (f.struct.cname, zero),
                    "    if (%s)" % nl,
                    "        kp_write_i8(%s, 1);" % w,
                    "    %s_write(%s, %s != NULL ? %s : &%s, v);" % (f.struct.cname, w, src, src, zero),
                    "}"]
        return self.write_value(f, src, flex, w)

    def non_default(self, f):
        src = "p->%s" % f.cname
        d = self.default_expr(f)
        if f.is_array:
            return "%s.n != %s" % (src, d if d is not None else "0")
        if f.struct is not None:
            if not f.nullable.empty():
                return "%s != NULL" % src
            return "!%s_is_default(&%s)" % (f.struct.cname, src)
        t = f.elem
        if t == "uuid":
            return "!kp_uuid_is_zero(&%s)" % src
        if t == "string":
            if d == "KP_STR_NULL":
                return "%s.len >= 0" % src
            if d is None:
                return "%s.len != 0" % src
            return "!kp_str_eq(%s, %s)" % (src, d)
        if t in ("bytes", "records"):
            return "%s.len %s" % (src, ">= 0" if d is not None else "!= 0")
        return "%s != %s" % (src, d if d is not None else ("false" if t == "bool" else "0"))

    def emit_write(self, s):
        self.line("static void %s_write(kp_writer *w, const %s *p, int16_t v)" % (s.cname, s.cname))
        self.line("{")
        self.line("(void)p;", 1)
        self.line("(void)v;", 1)
        for f in s.fields:
            cond = self.present(f)
            if cond == "0":
                continue
            self.guarded(cond, self.write_field(f, self.flex(f)), 1)
        fl = self.flex()
        tagged = self.tagged_fields(s)
        if fl != "false":
            if not tagged:
                self.guarded(fl if fl != "true" else "1", ["kp_write_uvarint(w, 0);"], 1)
            else:
                self.line("if (%s) {" % fl if fl != "true" else "{", 1)
                self.line("uint32_t ntags = 0;", 2)
                for f, tv in tagged:
                    self.line("if (%s)" % and_cond(tv.cond(self.valid), self.non_default(f)), 2)
                    self.line("ntags++;", 3)
                self.line("kp_write_uvarint(w, ntags);", 2)
                for f, tv in tagged:
                    body = ["kp_writer cw;", "kp_writer_init_count(&cw);"]
                    body += self.write_field(f, "true", "&cw")
                    body += ["kp_write_tag_header(w, %du, cw.total);" % f.tag]
                    body += self.write_field(f, "true")
                    self.guarded(and_cond(tv.cond(self.valid), self.non_default(f)), body, 2)
                self.line("}", 1)
        self.line("}")
        self.line()

    def emit_is_default(self, s):
        self.line("static bool %s_is_default(const %s *p)" % (s.cname, s.cname))
        self.line("{")
        conds = []
        for f in s.fields:
            conds.append("!(%s)" % self.non_default(f))
        self.line("return %s;" % (" && ".join(conds) if conds else "true"), 1)
        self.line("}")
        self.line()

    def emit_root_api(self):
        s = self.msg.root
        c = s.cname
        self.line("kp_err %s_decode(kp_reader *r, kp_arena *a, %s *p, int16_t v)" % (c, c))
        self.line("{")
        self.line("%s_read(r, a, p, v);" % c, 1)
        self.line("return r->err;", 1)
        self.line("}")
        self.line()
        self.line("void %s_encode(kp_writer *w, const %s *p, int16_t v)" % (c, c))
        self.line("{")
        self.line("%s_write(w, p, v);" % c, 1)
        self.line("}")
        self.line()
        self.line("size_t %s_size(const %s *p, int16_t v)" % (c, c))
        self.line("{")
        self.line("kp_writer w;", 1)
        self.line("kp_writer_init_count(&w);", 1)
        self.line("%s_write(&w, p, v);" % c, 1)
        self.line("return w.total;", 1)
        self.line("}")
        self.line()

    def analyze(self):
        """Marks the structs that need a min_size or is_default helper."""
        def inline_children(s):
            return [f.struct for f in s.fields
                    if f.struct is not None and not f.is_array and f.nullable.empty()]

        def mark(s, attr):
            if getattr(s, attr):
                return
            setattr(s, attr, True)
            for c in inline_children(s):
                mark(c, attr)

        for s in self.msg.structs:
            for f in s.fields:
                if f.is_array and f.struct is not None:
                    mark(f.struct, "used_in_array")
            for f, _ in self.tagged_fields(s):
                if f.struct is not None and not f.is_array and f.nullable.empty():
                    mark(f.struct, "used_tagged")

    def emit_code(self):
        self.analyze()
        for s in self.msg.structs:
            self.line("static void %s_read(kp_reader *r, kp_arena *a, %s *p, int16_t v);"
                      % (s.cname, s.cname))
            self.line("static void %s_write(kp_writer *w, const %s *p, int16_t v);"
                      % (s.cname, s.cname))
            if s.used_in_array:
                self.line("static size_t %s_min_size(int16_t v);" % s.cname)
            if s.used_tagged:
                self.line("static bool %s_is_default(const %s *p);" % (s.cname, s.cname))
        self.line()
        for s in self.msg.structs:
            self.emit_defaults(s)
            if s.used_in_array:
                self.emit_min_size(s)
            if s.used_tagged:
                self.emit_is_default(s)
            self.emit_read(s)
            self.emit_write(s)
        self.emit_root_api()
        return self.out

    def emit_prototypes(self):
        c = self.msg.root.cname
        for s in self.msg.structs:
            self.line("void %s_defaults(%s *p);" % (s.cname, s.cname))
        self.line("kp_err %s_decode(kp_reader *r, kp_arena *a, %s *p, int16_t v);" % (c, c))
        self.line("void %s_encode(kp_writer *w, const %s *p, int16_t v);" % (c, c))
        self.line("size_t %s_size(const %s *p, int16_t v);" % (c, c))
        self.line()

    # -- test fillers --
    def fill_value(self, f, target, elem_struct=False):
        t = f.elem
        if f.struct is not None:
            ref = target if (not f.nullable.empty() and not elem_struct) else "&" + target
            return ["%s_fill(%s, a, v, seed, depth + 1);" % (f.struct.cname, ref)]
        if t == "string":
            return ['%s = kp_str_from(kp_arena_printf(a, "s%%u", kp_fill_next(seed)));' % target]
        if t == "bytes":
            return ["%s = kp_fill_bytes(a, seed);" % target]
        if t == "records":
            return ["{", "    kp_slice b = kp_fill_bytes(a, seed);",
                    "    %s = (kp_records){b.p, b.len, NULL};" % target, "}"]
        if t == "uuid":
            return ["%s = kp_fill_uuid(seed);" % target]
        if t == "bool":
            return ["%s = (kp_fill_next(seed) & 1) != 0;" % target]
        if t == "float64":
            return ["%s = (double)kp_fill_next(seed) / 8.0;" % target]
        return ["%s = (%s)kp_fill_next(seed);" % (target, PRIMITIVES[t][0])]

    def fill_field(self, f):
        tgt = "p->%s" % f.cname
        nl = self.nullable(f)
        out = []
        if f.is_array:
            out += ["%s.n = depth < 3 ? (int32_t)(kp_fill_next(seed) %% 3u) : 0;" % tgt,
                    "%s.v = kp_arena_calloc(a, (size_t)%s.n + 1, sizeof(*%s.v));" % (tgt, tgt, tgt),
                    "for (int32_t i = 0; i < %s.n; i++) {" % tgt]
            out += ["    " + x for x in self.fill_value(f, "%s.v[i]" % tgt, True)]
            out.append("}")
            null_stmt = "%s.n = -1;" % tgt
        elif f.struct is not None and not f.nullable.empty():
            out += ["%s = kp_arena_alloc(a, sizeof(*%s));" % (tgt, tgt)]
            out += self.fill_value(f, tgt)
            null_stmt = "%s = NULL;" % tgt
        else:
            out += self.fill_value(f, tgt)
            null_stmt = {"string": "%s = KP_STR_NULL;", "bytes": "%s = (kp_slice){NULL, -1};",
                         "records": "%s = (kp_records){NULL, -1, NULL};"}.get(f.elem)
            null_stmt = null_stmt % tgt if null_stmt else None
        if null_stmt and nl != "false":
            out += ["if (%s && kp_fill_next(seed) %% 4u == 0)" % nl, "    " + null_stmt]
        return out

    def emit_fill(self):
        for s in self.msg.structs:
            self.line("void %s_fill(%s *p, kp_arena *a, int16_t v, uint32_t *seed, int depth)"
                      % (s.cname, s.cname))
            self.line("{")
            self.line("(void)a;", 1)
            self.line("(void)v;", 1)
            self.line("(void)seed;", 1)
            self.line("(void)depth;", 1)
            self.line("%s_defaults(p);" % s.cname, 1)
            for f in s.fields:
                cond = f.versions.cond(self.valid)
                if cond == "0":
                    continue
                self.guarded(cond, self.fill_field(f), 1)
            self.line("}")
            self.line()
        return self.out

    def emit_fill_prototypes(self):
        for s in self.msg.structs:
            self.line("void %s_fill(%s *p, kp_arena *a, int16_t v, uint32_t *seed, int depth);"
                      % (s.cname, s.cname))


BANNER = "/* generated by protocol/gen/kpgen.py; do not edit */\n"


def load_messages(schema_dir):
    msgs = []
    for sub in ("messages", "records"):
        d = os.path.join(schema_dir, sub)
        for fn in sorted(os.listdir(d)):
            if fn.endswith(".json"):
                m = Message(os.path.join(d, fn))
                if not m.valid.empty():
                    msgs.append(m)
    return msgs


def generated_apis():
    """The request names listed in apis.txt beside this script."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "apis.txt")
    with open(path) as fh:
        return {ln.strip() + "Request" for ln in fh if ln.strip() and not ln.startswith("#")}


def write_file(out_dir, name, text):
    with open(os.path.join(out_dir, name), "w") as fh:
        fh.write(text)


def main():
    if len(sys.argv) != 3:
        fail("usage: kpgen.py SCHEMA_DIR OUT_DIR")
    schema_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    every = load_messages(schema_dir)
    wanted = generated_apis()
    requests = {m.name: m for m in every if m.kind == "request"}
    for name in sorted(wanted - set(requests)):
        fail("apis.txt: no definition of %s" % name)
    served_keys = {requests[name].api_key for name in wanted}
    msgs = [m for m in every if m.kind in ("header", "data") or m.api_key in served_keys]
    names = {}
    for m in msgs:
        if m.cname in names:
            fail("%s and %s both map to %s" % (m.path, names[m.cname], m.cname))
        names[m.cname] = m.path
    apis = {}
    for m in msgs:
        if m.kind in ("request", "response"):
            apis.setdefault(m.api_key, {})[m.kind] = m
    for key, pair in apis.items():
        if set(pair) != {"request", "response"}:
            fail("api %d lacks a request or response" % key)
        rq, rs = pair["request"], pair["response"]
        if (rq.valid.lo, rq.valid.hi) != (rs.valid.lo, rs.valid.hi):
            fail("api %d: request and response versions differ" % key)

    # Header
    h = [BANNER, "/*", " * kp_msg: C structs and codecs for every Kafka message a broker serves,",
         " * one decode/encode/size function per message taking the version.",
         " *", " * Ownership: decoded strings, bytes and records borrow from the input",
         " * frame; arrays and nested structs live in the caller's kp_arena.",
         " * Threading: pure functions; callable from any thread.",
         " * Errors: decode returns the reader's sticky error (KP_ERR__UNDERFLOW,",
         " * KP_ERR__MALFORMED, KP_ERR__NOMEM); encode leaves errors in the writer.",
         " */", "#ifndef KP_MSG_H", "#define KP_MSG_H", "", '#include "kp_types.h"', ""]
    h.append("enum kp_api_key {")
    for key in sorted(apis):
        h.append("    KP_API_%s = %d," % (apis[key]["request"].api_snake.upper(), key))
    h.append("};")
    h.append("#define KP_API_KEY_MAX %d" % max(apis))
    h.append("")
    for m in msgs:
        e = Emitter(m)
        e.emit_typedefs()
        e.emit_prototypes()
        h += e.out
    h += ["/* One API: its version range and type-erased entry points. */",
          "typedef struct kp_msg_codec {",
          "    size_t size; /* sizeof the root struct */",
          "    kp_err (*decode)(kp_reader *r, kp_arena *a, void *p, int16_t v);",
          "    void (*encode)(kp_writer *w, const void *p, int16_t v);",
          "    void (*defaults)(void *p);",
          "} kp_msg_codec;", "",
          "typedef struct kp_api_info {",
          "    int16_t key;",
          "    const char *name;",
          "    int16_t min_version;",
          "    int16_t max_version;",
          "    int16_t first_flexible; /* -1 if never flexible */",
          "    bool unstable_top;      /* the top version is not released */",
          "    kp_msg_codec request;",
          "    kp_msg_codec response;",
          "} kp_api_info;", "",
          "/* The API served under key, or NULL. */",
          "const kp_api_info *kp_api_lookup(int key);",
          "/* All served APIs in key order; *n receives their count. */",
          "const kp_api_info *kp_api_all(int *n);",
          "", "#endif", ""]
    write_file(out_dir, "kp_msg.h", "\n".join(h))

    # Per-API code
    def code_file(ms):
        lines = [BANNER, '#include "kp_msg.h"', "", "#include <string.h>", ""]
        for m in ms:
            lines += Emitter(m).emit_code()
        return "\n".join(lines).rstrip() + "\n"

    for key in sorted(apis):
        rq, rs = apis[key]["request"], apis[key]["response"]
        write_file(out_dir, "kp_msg_%s.c" % rq.api_snake, code_file([rq, rs]))
    write_file(out_dir, "kp_msg_data.c",
               code_file([m for m in msgs if m.kind in ("header", "data")]))

    # API table
    t = [BANNER, '#include "kp_msg.h"', ""]
    for key in sorted(apis):
        for m in (apis[key]["request"], apis[key]["response"]):
            c = m.cname
            t += ["static kp_err %s_decode_any(kp_reader *r, kp_arena *a, void *p, int16_t v)" % c,
                  "{", "    return %s_decode(r, a, p, v);" % c, "}", "",
                  "static void %s_encode_any(kp_writer *w, const void *p, int16_t v)" % c,
                  "{", "    %s_encode(w, p, v);" % c, "}", "",
                  "static void %s_defaults_any(void *p)" % c,
                  "{", "    %s_defaults(p);" % c, "}", ""]
    t.append("static const kp_api_info api_table[] = {")
    for key in sorted(apis):
        rq, rs = apis[key]["request"], apis[key]["response"]
        ff = rq.flexible.lo if not rq.flexible.empty() else -1
        t.append('    {%d, "%s", %d, %d, %d, %s,' % (key, rq.name[: -len("Request")], rq.valid.lo,
                                                     rq.valid.hi, ff, "true" if rq.unstable_top else "false"))
        for m, end in ((rq, ","), (rs, "},")):
            t.append("     {sizeof(%s), %s_decode_any, %s_encode_any, %s_defaults_any}%s"
                     % (m.cname, m.cname, m.cname, m.cname, end))
    t += ["};", "",
          "const kp_api_info *kp_api_lookup(int key)",
          "{",
          "    static const kp_api_info *by_key[KP_API_KEY_MAX + 1];",
          "    static bool ready;",
          "    if (!ready) {",
          "        for (size_t i = 0; i < sizeof(api_table) / sizeof(api_table[0]); i++)",
          "            by_key[api_table[i].key] = &api_table[i];",
          "        ready = true;",
          "    }",
          "    if (key < 0 || key > KP_API_KEY_MAX)",
          "        return NULL;",
          "    return by_key[key];",
          "}", "",
          "const kp_api_info *kp_api_all(int *n)",
          "{",
          "    *n = (int)(sizeof(api_table) / sizeof(api_table[0]));",
          "    return api_table;",
          "}", ""]
    write_file(out_dir, "kp_msg_table.c", "\n".join(t))

    # Test fillers
    fh = [BANNER, "/* Test-only: fill every field present in a version with varied values. */",
          "#ifndef KP_MSG_FILL_H", "#define KP_MSG_FILL_H", "", '#include "kp_msg.h"', "",
          "uint32_t kp_fill_next(uint32_t *seed);",
          "kp_slice kp_fill_bytes(kp_arena *a, uint32_t *seed);",
          "kp_uuid kp_fill_uuid(uint32_t *seed);", "",
          "typedef void (*kp_fill_fn)(void *p, kp_arena *a, int16_t v, uint32_t *seed);",
          "/* Fillers of an API's request and response root structs, or NULL. */",
          "kp_fill_fn kp_fill_request(int key);",
          "kp_fill_fn kp_fill_response(int key);", ""]
    fc = [BANNER, '#include "kp_msg_fill.h"', "", "#include <string.h>", "",
          "uint32_t kp_fill_next(uint32_t *seed)",
          "{",
          "    /* xorshift32: varied, deterministic values */",
          "    uint32_t x = *seed ? *seed : 0x9e3779b9u;",
          "    x ^= x << 13;",
          "    x ^= x >> 17;",
          "    x ^= x << 5;",
          "    *seed = x;",
          "    return x;",
          "}", "",
          "kp_slice kp_fill_bytes(kp_arena *a, uint32_t *seed)",
          "{",
          "    int32_t n = (int32_t)(kp_fill_next(seed) % 24u);",
          "    uint8_t *b = kp_arena_alloc(a, (size_t)n + 1);",
          "    for (int32_t i = 0; i < n; i++)",
          "        b[i] = (uint8_t)kp_fill_next(seed);",
          "    return (kp_slice){b, n};",
          "}", "",
          "kp_uuid kp_fill_uuid(uint32_t *seed)",
          "{",
          "    kp_uuid u;",
          "    for (size_t i = 0; i < sizeof(u.b); i++)",
          "        u.b[i] = (uint8_t)kp_fill_next(seed);",
          "    return u;",
          "}", ""]
    for m in msgs:
        e = Emitter(m)
        e.emit_fill_prototypes()
        fh += e.out
        fc += Emitter(m).emit_fill()
    fh += ["", "#endif", ""]
    for kind in ("request", "response"):
        for key in sorted(apis):
            c = apis[key][kind].cname
            fc += ["static void %s_fill_any(void *p, kp_arena *a, int16_t v, uint32_t *seed)" % c,
                   "{", "    %s_fill(p, a, v, seed, 0);" % c, "}", ""]
        fc += ["kp_fill_fn kp_fill_%s(int key)" % kind, "{", "    switch (key) {"]
        for key in sorted(apis):
            fc += ["    case %d:" % key, "        return %s_fill_any;" % apis[key][kind].cname]
        fc += ["    default:", "        return NULL;", "    }", "}", ""]
    srcs = ["kp_msg_%s.c" % apis[k]["request"].api_snake for k in sorted(apis)]
    srcs += ["kp_msg_data.c", "kp_msg_table.c"]
    mb = ["# generated by protocol/gen/kpgen.py; do not edit", "protocol_msg_sources = files("]
    mb += ["  '%s'," % s for s in srcs] + [")", "protocol_fill_sources = files('kp_msg_fill.c')", ""]
    write_file(out_dir, "meson.build", "\n".join(mb))
    write_file(out_dir, "kp_msg_fill.h", "\n".join(fh))
    write_file(out_dir, "kp_msg_fill.c", "\n".join(fc).rstrip() + "\n")


if __name__ == "__main__":
    main()
