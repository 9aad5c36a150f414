"""The Painless subset: what scripts compute, Java's semantics where they differ from Python's,
and the errors and limits a script meets (Elasticsearch's `script_exception` with its stack)."""

from __future__ import annotations

from typing import Any

import pytest

from leafsearch.scripts.painless import MAX_DEPTH, CompiledScript
from leafsearch.scripts.runtime import Doc, DocValues, ScriptError


def run(source: str, **variables: Any) -> Any:
    return CompiledScript(source).run(variables)


def error(source: str, **variables: Any) -> dict[str, Any]:
    with pytest.raises(ScriptError) as caught:
        run(source, **variables)
    return caught.value.body()["error"]


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3),
        ("-7 / 2", -3),  # Java truncates toward zero
        ("-7 % 3", -1),  # the remainder takes the dividend's sign
        ("7.0 / 2", 3.5),
        ("10L * 3", 30),
        ("1.5f + 1", 2.5),
        ("0x1F", 31),
        ("'a' + 1 + 2", "a12"),
        ("1 + 2 + 'a'", "3a"),
        ("'x' + null + true + 1.0", "xnulltrue1.0"),
        ("3 > 2 && 2 > 1 || false", True),
        ("!(1 == 1)", False),
        ("1 == 1.0", True),
        ("'ab' == 'a' + 'b'", True),
        ("5 > 3 ? 'big' : 'small'", "big"),
        ("null ?: 'default'", "default"),
        ("(int) 3.99", 3),
        ("(double) 3", 3.0),
        ("Math.max(3, 9) + Math.min(2, -1) + Math.abs(-4)", 12),
        ("Math.pow(2, 10)", 1024.0),
        ("Math.round(2.5) + Math.floor(1.7)", 4.0),
        ("'Hello World'.toLowerCase().substring(6)", "world"),
        ("'a,b,c'.splitOnToken(',').size()", 3),
        ("'  x '.trim().length()", 1),
        ("'abc'.indexOf('c') + 'abc'.contains('b').toString().length()", 6),
        ("[1, 2, 3].size() + [1, 2, 3][-1]", 6),
        ("['a': 1, 'b': 2].b", 2),
        ("[:].isEmpty()", True),
        ("new ArrayList().size()", 0),
        ("def m = new HashMap(); m.put('k', 'v'); m.get('k') + m.size()", "v1"),
        ("def s = new HashSet(); s.add(1); s.add(1); s.size()", 1),
        ("'x' instanceof String", True),
        ("1 instanceof String", False),
    ],
)
def test_expressions_compute_as_java_does(source: str, value: Any) -> None:
    assert run(source) == value


def test_statements_declarations_loops_and_control_flow() -> None:
    source = """
        int total = 0;
        for (int i = 0; i < 10; i++) {
            if (i % 2 == 0) { continue; }
            if (i > 7) { break; }
            total += i;
        }
        def names = [];
        for (def word : params.words) { names.add(word.toUpperCase()); }
        for (w in params.words) { total += w.length(); }
        int n = 0;
        while (n < 3) { n++; }
        do { n += 10; } while (n < 20);
        Map<String, Object> out = new HashMap();
        out.total = total;
        out.names = names;
        out.n = n;
        return out;
    """
    assert run(source, params={"words": ["ab", "cde"]}) == {"total": 21, "names": ["AB", "CDE"], "n": 23}


def test_the_value_of_the_last_expression_is_the_result_without_return() -> None:
    assert run("def x = params.a * 2; x + 1", params={"a": 4}) == 9
    assert run("if (true) { return 'early' } 'late'") == "early"


def test_ctx_source_is_changed_in_place() -> None:
    ctx = {"_source": {"counter": 1, "tags": ["a"]}, "op": "index"}
    run(
        "ctx._source.counter += params.count; ctx._source.tags.add(params.tag); ctx._source.remove('gone');"
        " ctx._source.nested = ['x': 1]; if (ctx._source.counter > 5) { ctx.op = 'noop' }",
        ctx=ctx,
        params={"count": 5, "tag": "b"},
    )
    assert ctx == {"_source": {"counter": 6, "tags": ["a", "b"], "nested": {"x": 1}}, "op": "noop"}


def test_doc_values_are_read_as_elasticsearch_scripts_read_them() -> None:
    doc = Doc({"n": DocValues("n", [3, 5]), "empty": DocValues("empty", [])}.get)
    assert run("doc['n'].value + doc['n'].size() + doc['n'][1]", doc=doc) == 10
    assert run("doc['empty'].size() == 0 && doc['empty'].empty", doc=doc) is True
    missing = error("doc['empty'].value", doc=doc)
    assert missing["caused_by"]["type"] == "illegal_state_exception"
    assert "doesn't have a value" in missing["caused_by"]["reason"]
    unmapped = error("doc['nope'].value", doc=doc)
    assert unmapped["caused_by"] == {
        "type": "illegal_argument_exception",
        "reason": "No field found for [nope] in mapping",
    }


def test_a_compile_error_points_at_its_place() -> None:
    body = error("ctx._source.n ==== 1")
    assert body["type"] == "script_exception" and body["reason"] == "compile error"
    assert body["lang"] == "painless" and body["script"] == "ctx._source.n ==== 1"
    assert body["position"] == {"offset": 17, "start": 0, "end": 20}
    assert body["script_stack"] == ["ctx._source.n ==== 1", " " * 17 + "^---- HERE"]
    assert body["caused_by"]["type"] == "illegal_argument_exception"
    assert error("int x = ; x")["reason"] == "compile error"
    assert error("unknownVariable + 1")["caused_by"]["reason"] == "cannot resolve symbol [unknownVariable]"
    assert error("'unterminated")["reason"] == "compile error"


def test_a_long_script_shows_a_window_around_the_error() -> None:
    source = "int a = 1; " * 10 + "a.foo();" + " int b = 2;" * 10
    body = error(source)
    offset = body["position"]["offset"]
    assert source[offset:].startswith("foo")
    window, pointer = body["script_stack"]
    assert window.startswith("... ") and window.endswith(" ...")
    assert window[pointer.index("^") :].startswith("foo")


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        ("1 / 0", "arithmetic_exception"),
        ("def x = null; x.length()", "null_pointer_exception"),
        ("ctx._source.missing.field = 1", "null_pointer_exception"),
        ("[1, 2][5]", "index_out_of_bounds_exception"),
        ("'a' - 1", "class_cast_exception"),
        ("if (1) { 2 }", "class_cast_exception"),
        ("String s = 5", "class_cast_exception"),
        ("[1].nope()", "illegal_argument_exception"),
    ],
)
def test_runtime_errors_are_script_exceptions_with_the_java_cause(source: str, cause: str) -> None:
    body = error(source, ctx={"_source": {}})
    assert body["type"] == "script_exception" and body["reason"] == "runtime error"
    assert body["caused_by"]["type"] == cause


def test_no_script_can_loop_forever_or_nest_without_bound() -> None:
    for source in (
        "while (true) {}",
        "for (;;) { int y = 5; }",
        "do { } while (true)",
        "int i = 0; while (i >= 0) { i++ }",
    ):
        body = error(source)
        assert body["caused_by"] == {
            "type": "painless_error",
            "reason": "The maximum number of statements that can be executed in a loop has been reached.",
        }
    deep = "(" * (MAX_DEPTH + 5) + "1" + ")" * (MAX_DEPTH + 5)
    assert error(deep)["reason"] == "compile error"
    assert run("(" * (MAX_DEPTH // 2) + "1" + ")" * (MAX_DEPTH // 2)) == 1


@pytest.mark.parametrize(
    "source",
    [
        "String s = 'x'; while (true) { s = s + s }",
        "def l = [1]; while (true) { l.addAll(l) }",
        "String s = 'x'; while (true) { s = s.replace('x', 'xx') }",
        "String s = 'x'; while (true) { s = s.concat(s) }",
    ],
)
def test_no_script_builds_a_value_past_the_limit(source: str) -> None:
    body = error(source)
    assert body["caused_by"]["type"] == "circuit_breaking_exception"


def test_a_compiled_script_runs_again_with_fresh_variables() -> None:
    script = CompiledScript("int n = params.start; n += 1; n")
    assert [script.run({"params": {"start": i}}) for i in range(3)] == [1, 2, 3]


def test_geo_points_built_in_a_script() -> None:
    """`new GeoPoint(lat, lon)` (whitelisted in Elasticsearch's Painless) with `lat`, `lon`, equality."""
    script = CompiledScript(
        "def p = new GeoPoint(1.5, params.lon); return [p.lat, p.getLon(), p == new GeoPoint(1.5, 2)]"
    )
    assert script.run({"params": {"lon": 2}}) == [1.5, 2.0, True]
    assert CompiledScript("GeoPoint p = new GeoPoint(); p.lat + p.lon").run({}) == 0.0
